#!/usr/bin/env bash
# Installs what pipetrain needs to build, test and run its demo, one line per step.
# Debian's packages come from apt. The few PyPI tools (onnxruntime, the
# reference for forward passes; onnxruntime-training, the peer trainer the
# benchmark measures; transformers 4.30.2, the Hugging Face reference models)
# each go into a folder of their own under /opt/pipetrain, without the
# dependencies Debian already provides: nothing lands in the system
# interpreter's site-packages and nothing shadows a Debian package (numpy,
# protobuf), so pip has nothing to resolve against them.
# Idempotent: when everything is present it only checks.
# Usage: scripts/setup.sh [--check | --build-deps]
#   --check       report what is missing, install nothing, exit 1 if anything is
#   --build-deps  only what compiling the release tree needs (the test command installs
#                 the rest, PyTorch and the datasets among it, while the build runs)
set -euo pipefail
check=0 build_deps=0
case ${1:-} in
  --check) check=1 ;;
  --build-deps) build_deps=1 ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--check | --build-deps]" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)

# What compiling the release tree needs, then the rest: the sanitizer compilers, the
# references, the datasets.
BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config git dpkg-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  libopenblas-dev libopenblas-openmp-dev libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
  nlohmann-json3-dev libcli11-dev libfmt-dev libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev libsentencepiece-dev libicu-dev xz-utils
)
DEB_PACKAGES=(
  "${BUILD_PACKAGES[@]}"
  libonnx-testdata clang libclang-rt-14-dev lld
  python3-torch python3-torchvision python3-numpy python3-onnx python3-pip
  dataset-fashion-mnist python3-sklearn
  fortunes python3-flatbuffers python3-packaging
)
((build_deps)) && DEB_PACKAGES=("${BUILD_PACKAGES[@]}")
PY=/usr/bin/python3
ORT_DIR=${PIPETRAIN_ORT:-/opt/pipetrain/onnxruntime}
ORT_TRAINING_DIR=/opt/pipetrain/ort-training
missing_any=0

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: Debian packages: all ${#DEB_PACKAGES[@]} present"
elif ((check)); then
  echo "setup: Debian packages: missing ${missing[*]}"
  missing_any=1
else
  echo "setup: Debian packages: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ((build_deps)); then
  echo "setup: what the build needs is present"
  exit 0
fi

# pip into DIR: the package alone (--no-deps: Debian's numpy and protobuf serve it).
pip_target() {  # DIR PACKAGE
  local args=(-m pip install --quiet --disable-pip-version-check --no-warn-script-location
              --root-user-action=ignore --no-deps --upgrade --target "$1" "$2")
  # Debian's pip refuses to install outside apt (PEP 668) unless told to.
  "$PY" -m pip install --help 2>/dev/null | grep -q -- --break-system-packages &&
    args+=(--break-system-packages)
  mkdir -p "$1"
  "$PY" "${args[@]}"
}
# One PyPI tool: present, missing (--check), or installed now.
pypi_step() {  # LABEL DIR PACKAGE IMPORT-CHECK [optional]
  local label=$1 dir=$2 package=$3 probe=$4 optional=${5:-}
  if PYTHONPATH=$dir "$PY" -c "$probe" 2>/dev/null; then
    echo "setup: $label in $dir: present"
  elif ((check)); then
    echo "setup: $label in $dir: missing"
    [[ -n $optional ]] || missing_any=1
  elif pip_target "$dir" "$package" >/dev/null 2>&1 && PYTHONPATH=$dir "$PY" -c "$probe" 2>/dev/null; then
    echo "setup: $label in $dir: installed"
  elif [[ -n $optional ]]; then
    echo "setup: $label: unavailable from PyPI here; $optional"
  else
    echo "setup: $label: pip could not install it into $dir" >&2
    exit 1
  fi
}
# The probes import from DIR itself (PYTHONPATH comes first), not a copy elsewhere.
pypi_step onnxruntime "$ORT_DIR" onnxruntime \
  "import onnxruntime as m, sys; sys.exit(not m.__file__.startswith('$ORT_DIR/'))"
pypi_step onnxruntime-training "$ORT_TRAINING_DIR" onnxruntime-training-cpu \
  "import onnxruntime.training as m, sys; sys.exit(not m.__file__.startswith('$ORT_TRAINING_DIR/'))" \
  "the training benchmark will leave it out"
# transformers 4.30.2 and its pure-Python dependencies (its own script: it needs them).
if ((check)); then
  if "$here/install_transformers.sh" --check >/dev/null 2>&1; then
    echo "setup: transformers 4.30.2 in ${PIPETRAIN_PYDEPS:-/opt/pipetrain/pydeps}: present"
  else
    echo "setup: transformers 4.30.2 in ${PIPETRAIN_PYDEPS:-/opt/pipetrain/pydeps}: missing"
    missing_any=1
  fi
else
  echo "setup: $("$here/install_transformers.sh" | tail -1)"
fi
if ((check)); then
  ((missing_any == 0)) && echo "setup: nothing missing" || echo "setup: run scripts/setup.sh to install what is missing"
  exit "$missing_any"
fi
echo "setup: all dependencies present"
