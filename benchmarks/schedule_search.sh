#!/usr/bin/env bash
# Schedule search against the hand-made flush schedules on every zoo model, in
# the simulator: each model profiled analytically on a V100 at batch 32, cut
# straight into P stages by the DP, 2P microbatches per step. Prints, per model
# and P, the searched step, the best hand-made one within the same memory and the
# busiest worker's compute (the lower bound).
# Usage: benchmarks/schedule_search.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pipetrain=${1:-$root/build}/cli/pipetrain
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-9s %2s %12s %12s %-12s %7s %12s\n' model P "search ms" "hand ms" "(which)" gain "bound ms"
for model in $("$pipetrain" zoo list | awk 'NR > 1 && NF > 3 && $1 != "params:" { print $1 }'); do
  "$pipetrain" zoo export "$model" -o "$work/$model.onnx" >/dev/null
  "$pipetrain" profile "$work/$model.onnx" --batch 32 --device v100 -o "$work/$model.json" >/dev/null
  for p in 2 4; do
    "$pipetrain" partition "$work/$model.json" --topology "$p" --bandwidth 10e9 --straight \
      -o "$work/$model-$p.plan" >/dev/null
    line=$("$pipetrain" simulate "$work/$model-$p.plan" --profile "$work/$model.json" \
      --schedule search --microbatches $((2 * p)) | grep '^search:')
    # search: S ms per step, G% below ... (NAME, H ms); lower bound (...) B ms; N simulations
    python3 - "$model" "$p" "$line" <<'PY'
import re, sys
model, p, line = sys.argv[1:]
s = float(re.search(r"search: ([0-9.]+) ms", line).group(1))
name, h = re.search(r"\(([^,]+), ([0-9.]+) ms\)", line).groups()
b = float(re.search(r"\) ([0-9.]+) ms;", line).group(1))
print(f"{model:<9} {p:>2} {s:>12.3f} {float(h):>12.3f} {name:<12} {100 * (1 - s / float(h)):>6.1f}% {b:>12.3f}")
PY
  done
done
