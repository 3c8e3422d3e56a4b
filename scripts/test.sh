#!/usr/bin/env bash
# Installs, builds and runs the whole test suite: unit tests, ONNX's operator
# conformance data, the PyTorch reference models, and a bounded fuzz run of the
# importer. Usage: scripts/test.sh   (FUZZ_SECONDS=0 skips the fuzz run)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
cd "$root/build"
export OMP_WAIT_POLICY=passive  # 2 shared cores: spinning OpenMP barriers cost milliseconds per oneDNN call
ctest --output-on-failure -j "$(nproc)" --timeout 1200
if [[ ${FUZZ_SECONDS:-60} != 0 ]]; then
  "$root/scripts/fuzz.sh" "${FUZZ_SECONDS:-60}"
fi
