#!/usr/bin/env bash
# The README's accuracy claims, checked: the zoo LeNet, pipelined over 2 stages
# with asynchronous 1F1B and weight stashing, reaches 89% test accuracy on
# Fashion-MNIST in 4 epochs and the MLP 95% on digits (the demo's commands);
# on a CPU with bf16 arithmetic the LeNet once more in bf16 mixed precision,
# within 0.3 points of fp32 (seeds 0-2 moved it by -0.07, +0.13, +0.05).
set -euo pipefail
pipetrain=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_WAIT_POLICY=passive
last_accuracy() {
  /usr/bin/python3 -c "import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if 'test_accuracy' in l][-1]['test_accuracy'])" "$1"
}
"$pipetrain" zoo export mlp -o "$out/mlp.onnx"
"$pipetrain" train "$out/mlp.onnx" --data digits --batch 32 --epochs 30 --loss cross-entropy \
  --optimizer adam --lr 0.003 --seed 0 --quiet --run-dir "$out/mlp"
"$pipetrain" zoo export lenet -o "$out/lenet.onnx"
"$pipetrain" train "$out/lenet.onnx" --data fashion-mnist --batch 64 --epochs 4 --loss cross-entropy \
  --optimizer adam --lr 0.002 --lr-schedule cosine --seed 0 --stages 2 --schedule 1f1b --quiet \
  --run-dir "$out/lenet"
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
  "$pipetrain" train "$out/lenet.onnx" --data fashion-mnist --batch 64 --epochs 4 \
    --loss cross-entropy --optimizer adam --lr 0.002 --lr-schedule cosine --seed 0 --stages 2 \
    --schedule 1f1b --quiet --run-dir "$out/lenet-bf16" --precision bf16
  fp32=$(last_accuracy "$out/lenet/metrics.jsonl")
  bf16=$(last_accuracy "$out/lenet-bf16/metrics.jsonl")
  echo "Fashion-MNIST LeNet in bf16: $bf16 (fp32: $fp32; allowed: 0.003 apart)"
  /usr/bin/python3 -c "import sys; sys.exit(0 if abs(float('$bf16') - float('$fp32')) <= 0.003 else 1)"
else
  echo "no bf16 arithmetic on this CPU: the bf16 LeNet is not run"
fi
mlp=$(last_accuracy "$out/mlp/metrics.jsonl")
lenet=$(last_accuracy "$out/lenet/metrics.jsonl")
echo "digits MLP: $mlp (target 0.95), Fashion-MNIST LeNet: $lenet (target 0.89)"
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$mlp') >= 0.95 and float('$lenet') >= 0.89 else 1)"
