#!/usr/bin/env bash
# Installs what is missing and builds pipetrain (Release) into build/: one
# configuration for the demo, the tests and an install, so that running one
# after another rebuilds nothing.
# Usage: scripts/build.sh [extra cmake args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# PIPETRAIN_BUILD_DEPS_ONLY=1: install only what compiling needs (scripts/test.sh
# installs the rest beside the build).
if [[ ${PIPETRAIN_BUILD_DEPS_ONLY:-0} == 1 ]]; then
  "$root/scripts/setup.sh" --build-deps
else
  "$root/scripts/setup.sh"
fi
# The CUDA backend is compiled here only where a GPU can run it. Without one the
# GPU bundle (scripts/gpu_bundle.sh) compiles it, for the GPU machine's sm_90: here
# it would only be compiled a second time (187 CPU-seconds for two architectures).
cuda=AUTO
nvidia-smi -L >/dev/null 2>&1 || cuda=OFF
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPIPETRAIN_CUDA=$cuda "$@" >/dev/null
ninja -C "$root/build" -j "$(nproc)"
