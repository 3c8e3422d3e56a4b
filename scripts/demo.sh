#!/usr/bin/env bash
# The main job (until training lands): export a torchvision ResNet-18 from
# PyTorch, show what `pipetrain inspect` sees, run it forward with pipetrain on
# the CPU and compare with PyTorch's output on the same input.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
out=$root/build/demo
mkdir -p "$out"
echo "== exporting torchvision resnet18 with PyTorch =="
/usr/bin/python3 "$root/scripts/export_reference_models.py" "$out" --models resnet18 2>/dev/null
model=$out/resnet18/model.onnx
echo "== pipetrain inspect =="
"$root/build/cli/pipetrain" inspect "$model" --layer-depth 2
echo "== pipetrain run =="
"$root/build/cli/pipetrain" run "$model" --input "input_0=$out/resnet18/input_0.npy" \
  --output-dir "$out/resnet18/pipetrain" --repeat 3
/usr/bin/python3 - "$out/resnet18" <<'PY'
import sys, glob, numpy as np
d = sys.argv[1]
ours = np.load(glob.glob(d + "/pipetrain/*.npy")[0])
torch_out = np.load(d + "/output_0.npy")
err = np.abs(ours - torch_out).max() / np.abs(torch_out).max()
print(f"pipetrain vs PyTorch on the same input: max relative error {err:.2e}")
sys.exit(0 if err <= 1e-4 else 1)
PY
