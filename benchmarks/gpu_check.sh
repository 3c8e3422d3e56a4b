#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds with the CUDA backend, runs the op
# table CPU against CUDA for every op (and the NCCL contract test), trains the
# LeNet demo on one GPU with 2 pipeline stages, reports a step's host-device
# traffic, and times ResNet-50 and a Transformer training step against
# PyTorch on the same GPU, printing the ratios. Exits non-zero on the first
# check that fails.
#
# Usage: benchmarks/gpu_check.sh [--steps N]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${2:-10}
export OMP_WAIT_POLICY=passive

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi found none)" >&2
  exit 1
fi

echo "== build (CUDA backend: sm_80, sm_90) =="
"$root/scripts/build.sh" -DPIPETRAIN_CUDA=ON
build=$root/build

echo "== op table: CPU against CUDA, every op =="
out=$("$build/tests/executor_device_parity_test" 2>&1) || { echo "$out"; exit 1; }
echo "$out" | tail -4
if echo "$out" | grep -q "SKIPPED"; then
  echo "gpu_check: the CUDA parity test was skipped (no device visible to it)" >&2
  exit 1
fi
(cd "$build" && ctest -R nccl_communicator_test --output-on-failure)

echo "== LeNet on Fashion-MNIST, 2 stages on one GPU =="
work=$(mktemp -d)
"$build/cli/pipetrain" zoo export lenet -o "$work/lenet.onnx"
"$build/cli/pipetrain" train "$work/lenet.onnx" --data fashion-mnist --batch 64 --epochs 1 \
  --loss cross-entropy --optimizer adam --lr 0.002 --seed 0 --stages 2 --schedule 1f1b \
  --backend cuda --quiet --run-dir "$work/lenet-run"

echo "== host-device traffic of a LeNet step (device-resident tensors) against per-node staging =="
"$build/benchmarks/train_step" "$work/lenet.onnx" --backend cuda --batch 64 --steps 3 --warmup 1

echo "== training step against PyTorch on the same GPU =="
/usr/bin/python3 "$root/benchmarks/compare_training.py" "$build" --device cuda \
  --models resnet50,transformer --threads 1 --steps "$steps"
