#!/usr/bin/env bash
# Draws docs/schedules/NAME.svg, each schedule's timeline from `pipetrain simulate`, and
# prints simulate's table for docs/schedules.md, on a textbook pipeline: 4 workers, 8
# equal layers (forward 1 ms, backward 2 ms: a stage's F = B = W = 2 ms once its backward
# is split), 8 microbatches, transfers too small to see.
# Usage: scripts/schedule_pictures.sh [BUILD_DIR (default build)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pipetrain=${1:-$root/build}/cli/pipetrain
[[ -x $pipetrain ]] || { echo "schedule_pictures: no $pipetrain (scripts/build.sh builds it)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  echo "node0 -- Input0 -- forward_compute_time=0.000000, backward_compute_time=0.000000, activation_size=0.0, parameter_size=0.000"
  for i in 1 2 3 4 5 6 7 8; do
    echo "node$i -- layer$i -- forward_compute_time=1.000000, backward_compute_time=2.000000, activation_size=1024.0, parameter_size=4096.000"
  done
  for i in 0 1 2 3 4 5 6 7; do printf '\tnode%d -- node%d\n' "$i" $((i + 1)); done
} >"$work/graph.txt"
"$pipetrain" partition "$work/graph.txt" --topology 4 --bandwidth 10e9 --straight \
  -o "$work/plan.json" >/dev/null
mkdir -p "$root/docs/schedules"
for s in gpipe 1f1b zb-h1 zb-h2 interleaved zb-v dualpipev v-half pipedream 2bw; do
  "$pipetrain" simulate "$work/plan.json" --profile "$work/graph.txt" --schedule "$s" \
    --microbatches 8 --svg "$root/docs/schedules/$s.svg" | tail -1
done
