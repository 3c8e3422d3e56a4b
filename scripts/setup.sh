#!/usr/bin/env bash
# Installs what pipetrain needs to build, test and run its demo.
# Idempotent: when every package is already present it only checks and exits.
set -euo pipefail

DEB_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libonnx-dev libprotobuf-dev protobuf-compiler
  libopenblas-dev libopenblas-openmp-dev libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
  nlohmann-json3-dev libcli11-dev libfmt-dev libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-testdata clang libclang-rt-14-dev
  python3-torch python3-torchvision python3-numpy python3-onnx python3-pip
  dataset-fashion-mnist python3-sklearn zlib1g-dev
  fortunes libsentencepiece-dev
)
PIP_PACKAGES=(onnxruntime)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python reference tools run under Debian's interpreter (it has Debian's torch).
PY=/usr/bin/python3
for p in "${PIP_PACKAGES[@]}"; do
  if ! "$PY" -c "import ${p}" 2>/dev/null; then
    echo "setup: pip installing $p"
    "$PY" -m pip install -q --break-system-packages "$p"
  fi
done
# onnxruntime-training (the peer trainer benchmarks/compare_training.py measures) ships its own
# `onnxruntime` module: kept in its own directory so it never shadows the inference package.
ORT_TRAINING=/opt/pipetrain/ort-training
if [[ ! -d $ORT_TRAINING/onnxruntime/training ]]; then
  echo "setup: pip installing onnxruntime-training-cpu into $ORT_TRAINING"
  "$PY" -m pip install -q --no-deps --target "$ORT_TRAINING" onnxruntime-training-cpu 2>/dev/null ||
    echo "setup: onnxruntime-training-cpu unavailable; the training benchmark will skip it"
fi
# Hugging Face transformers 4.30.2 (the PyTorch reference suite's GPT-2, BERT, Llama, T5 and
# DistilBERT), beside Debian's torch, in its own directory.
"$(dirname "$0")/install_transformers.sh" >/dev/null
echo "setup: all dependencies present"
