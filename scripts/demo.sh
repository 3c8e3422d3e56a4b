#!/usr/bin/env bash
# The main job: train two zoo models on real datasets on the CPU.
#  1. A LeNet-style CNN on Fashion-MNIST (60,000 28x28 images, Debian's
#     dataset-fashion-mnist), pipelined over 2 stages (one worker thread each)
#     with PipeDream's asynchronous 1F1B and weight stashing, 4 epochs: at
#     least 89% test accuracy. It ends with each worker's utilisation, the
#     measured against the simulated throughput, and both timelines.
#  2. An MLP on scikit-learn's digits (1,797 8x8 images), one worker, 30
#     epochs: about 97%.
# Each run shows a progress bar, the test accuracy after every epoch, and
# writes metrics.jsonl, a loss curve (loss.svg) and the trained model (ONNX)
# under build/demo/. Ends non-zero if an accuracy target is missed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
pipetrain=$root/build/cli/pipetrain
out=$root/build/demo
mkdir -p "$out"
export OMP_WAIT_POLICY=passive  # OpenMP threads sleep instead of spinning between kernels

check_accuracy() {  # run-dir minimum
  /usr/bin/python3 - "$1/metrics.jsonl" "$2" <<'PY'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if '"test_accuracy"' in l][-1]
ok = last["test_accuracy"] >= float(sys.argv[2])
print(f"test accuracy {100 * last['test_accuracy']:.2f}% (target {100 * float(sys.argv[2]):.0f}%): "
      + ("reached" if ok else "MISSED"))
sys.exit(0 if ok else 1)
PY
}

echo "== LeNet on Fashion-MNIST, 2 pipeline stages, 1F1B with weight stashing =="
"$pipetrain" zoo export lenet -o "$out/lenet.onnx"
"$pipetrain" train "$out/lenet.onnx" --data fashion-mnist --batch 64 --epochs 4 \
  --loss cross-entropy --optimizer adam --lr 0.002 --lr-schedule cosine --seed 0 \
  --stages 2 --schedule 1f1b --run-dir "$out/lenet-run" -o "$out/lenet-trained.onnx"
check_accuracy "$out/lenet-run" 0.89

echo "== MLP on digits =="
"$pipetrain" zoo export mlp -o "$out/mlp.onnx"
"$pipetrain" train "$out/mlp.onnx" --data digits --batch 32 --epochs 30 --loss cross-entropy \
  --optimizer adam --lr 0.003 --seed 0 --quiet --run-dir "$out/mlp-run" -o "$out/mlp-trained.onnx"
check_accuracy "$out/mlp-run" 0.95
