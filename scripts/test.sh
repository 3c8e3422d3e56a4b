#!/usr/bin/env bash
# Installs, builds and runs the whole test suite (docs/testing.md says what each
# phase proves):
#   build          the release build, configured as scripts/demo.sh configures it
#   ctest          unit tests, ONNX's operator conformance data, the PyTorch reference
#                  models, the CLI end to end (single worker, pipelined, MPI jobs)
#   kernel paths   the kernel check, fusion tests and PyTorch reference once more per
#                  kernel path this CPU can select (tests/kernel_paths.sh)
#   install        cmake --install and the .deb, each training from a clean prefix
#   ASan + fuzz    one clang tree: AddressSanitizer + UndefinedBehaviorSanitizer over the
#                  unit and CLI tests, then every parser's fuzzer for FUZZ_SECONDS
#   TSan           ThreadSanitizer over the pipeline, communicators and pipelined CLI
#   GPU bundle     the bundle a bare GPU machine runs, built and proven on the CPU
# Usage: scripts/test.sh [--quick]
#   --quick  the edit loop: the build and the fast ctest suite only (no `slow`,
#            `reference`, `conformance` or `mpi` labels, no kernel paths, install,
#            sanitizers, fuzzers or GPU bundle)
# ASAN=0 or TSAN=0 skips that sanitizer build; FUZZ_SECONDS=N runs each fuzzer N seconds
# (5 by default: the seeds and a short search; `scripts/fuzz.sh 600` is the long run, 0 skips
# them); GPU_BUNDLE=0 skips the bundle.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
quick=0
[[ ${1:-} == --quick ]] && quick=1
# Each phase's end on the clock, so that a slow CI run shows where its time went.
phase() { echo "== test.sh: $1 done, $((SECONDS / 60)) min $((SECONDS % 60)) s in =="; }
# Disk first: a full disk surfaced as a linker's "Bus error" 13 minutes in. The trees at
# their largest (docs/testing.md): build 4 GB (3.4 of it PyTorch's reference exports),
# ASan 0.6, TSan 0.4, GPU bundle 0.3; --quick builds only the first, less the exports.
need_gb=$((quick ? 1 : 6))
free_kb=$(df -Pk "$root" | awk 'NR == 2 { print $4 }')
kept_kb=$(cd "$root" && { du -sk build build-address build-thread build-gpu-bundle 2>/dev/null || true; } |
  awk '{ s += $1 } END { print s + 0 }')
if ((free_kb + kept_kb < need_gb * 1024 * 1024)); then
  echo "test.sh: the build trees need about $need_gb GB beside $root, and its disk has" \
    "$((free_kb / 1024 / 1024)) GB free (df -h $root)" >&2
  exit 1
fi
# A fresh machine installs PyTorch, the datasets, the sanitizers' clang and the PyPI tools
# while the release tree compiles (it needs none of them): apt and pip wait on the network
# and on dpkg, the compiler on the CPU.
"$root/scripts/setup.sh" --build-deps
mkdir -p "$root/build"
setup_log=$root/build/setup.log
"$root/scripts/setup.sh" >"$setup_log" 2>&1 &
setup_pid=$!
PIPETRAIN_BUILD_DEPS_ONLY=1 "$root/scripts/build.sh"
wait "$setup_pid" || { cat "$setup_log" >&2; echo "test.sh: setup failed" >&2; exit 1; }
cat "$setup_log"
phase build
cd "$root/build"
# ctest runs two tests on 2 cores: no worker has a core of its own. Spinning OpenMP barriers
# cost milliseconds per oneDNN call, and a pipeline worker polling for its next message took
# the other test's core (executor/pipeline/pipeline.cc, recv_spin).
export OMP_WAIT_POLICY=passive PIPETRAIN_RECV_SPIN_US=0
# The kernel check's verdicts (executor/kernel_check_cache.h) in the build tree, not in ~/.cache:
# each binary and variable set checks once, its later processes restore the verdict.
export PIPETRAIN_CACHE_DIR=${PIPETRAIN_CACHE_DIR:-$root/build/kernel-check-cache}
if ((quick)); then
  ctest --output-on-failure -j "$(nproc)" --timeout 1200 -LE "slow|reference|conformance|mpi"
  phase "ctest (quick)"
  exit 0
fi
ctest --output-on-failure -j "$(nproc)" --timeout 1200
phase ctest
"$root/tests/kernel_paths.sh" "$root/build"
phase "kernel paths"
"$root/tests/install_check.sh" "$root/build"
phase install
if [[ ${ASAN:-1} != 0 ]]; then
  "$root/scripts/sanitize.sh" address
  phase "AddressSanitizer"
  if [[ ${FUZZ_SECONDS:-5} != 0 ]]; then
    "$root/scripts/fuzz.sh" "${FUZZ_SECONDS:-5}"
    phase fuzz
  fi
fi
if [[ ${TSAN:-1} != 0 ]]; then
  "$root/scripts/sanitize.sh" thread
  phase "ThreadSanitizer"
fi
if [[ ${GPU_BUNDLE:-1} != 0 ]]; then
  "$root/scripts/gpu_bundle.sh" --check
  phase "GPU bundle"
fi
