#!/usr/bin/env bash
# Installs, builds and runs the whole test suite: unit tests, ONNX's operator
# conformance data, the PyTorch reference models (again per kernel path this CPU
# can select: tests/kernel_paths.sh), the AddressSanitizer +
# UndefinedBehaviorSanitizer and ThreadSanitizer builds of the unit and pipeline
# tests, a bounded run of every parser's fuzzer, and the GPU bundle built and
# proven on the CPU from a clean prefix.
# Usage: scripts/test.sh   (ASAN=0 or TSAN=0 skips that sanitizer build; FUZZ_SECONDS=N
# runs each fuzzer N seconds, 20 by default, 0 skips them; GPU_BUNDLE=0 skips the bundle)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Each phase's end on the clock, so that a slow CI run shows where its time went.
phase() { echo "== test.sh: $1 done, $((SECONDS / 60)) min $((SECONDS % 60)) s in =="; }
# The CUDA backend is compiled by the GPU bundle below (sm_90); the main build compiles it
# as well only where a GPU can run its tests: without one its CUDA objects (187 CPU-seconds,
# cuda_backend.cu 122 of them, for two architectures) would only be compiled twice.
cuda=AUTO
if [[ ${GPU_BUNDLE:-1} != 0 ]] && ! nvidia-smi -L >/dev/null 2>&1; then cuda=OFF; fi
"$root/scripts/build.sh" -DPIPETRAIN_CUDA=$cuda
phase build
cd "$root/build"
export OMP_WAIT_POLICY=passive  # 2 shared cores: spinning OpenMP barriers cost milliseconds per oneDNN call
ctest --output-on-failure -j "$(nproc)" --timeout 1200
phase ctest
# The kernel check, the fusion tests and the PyTorch reference once more per kernel
# path this CPU can select (OpenBLAS kernel sets, oneDNN ISA caps, activation layouts):
# the CPU's flags, and which paths ran and which it cannot run, go to the log.
"$root/tests/kernel_paths.sh" "$root/build"
phase "kernel paths"
# The sanitizer builds (scripts/sanitize.sh; times on 2 cores in the README).
if [[ ${ASAN:-1} != 0 ]]; then
  "$root/scripts/sanitize.sh" address
  phase "AddressSanitizer"
fi
if [[ ${TSAN:-1} != 0 ]]; then
  "$root/scripts/sanitize.sh" thread
  phase "ThreadSanitizer"
fi
if [[ ${FUZZ_SECONDS:-20} != 0 ]]; then
  "$root/scripts/fuzz.sh" "${FUZZ_SECONDS:-20}"
  phase fuzz
fi
# The bundle a bare GPU machine runs benchmarks/gpu_check.sh from, and its CPU proof.
if [[ ${GPU_BUNDLE:-1} != 0 ]]; then
  "$root/scripts/gpu_bundle.sh" --check
  phase "GPU bundle"
fi
