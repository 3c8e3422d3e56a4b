#!/usr/bin/env bash
# Installs, builds and runs the whole test suite: unit tests, ONNX's operator
# conformance data, the PyTorch reference models, a ThreadSanitizer build of
# the pipeline tests, and a bounded run of every parser's fuzzer.
# Usage: scripts/test.sh   (TSAN=0 skips the sanitizer build; FUZZ_SECONDS=N runs each
# fuzzer N seconds, 20 by default, 0 skips them)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
cd "$root/build"
export OMP_WAIT_POLICY=passive  # 2 shared cores: spinning OpenMP barriers cost milliseconds per oneDNN call
ctest --output-on-failure -j "$(nproc)" --timeout 1200
# ThreadSanitizer over the pipeline, communicator and loader tests (about 5
# minutes on 2 cores; TSAN=0 skips it). The ASan+UBSan set takes 21 minutes:
# scripts/sanitize.sh address runs it by hand.
if [[ ${TSAN:-1} != 0 ]]; then
  "$root/scripts/sanitize.sh" thread
fi
if [[ ${FUZZ_SECONDS:-20} != 0 ]]; then
  "$root/scripts/fuzz.sh" "${FUZZ_SECONDS:-20}"
fi
