#!/usr/bin/env bash
# Builds the importer fuzzer with clang and runs it for a bounded time on a
# seed corpus of small ONNX test models. Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DPIPETRAIN_FUZZ=ON \
  -DPIPETRAIN_WERROR=OFF -DPIPETRAIN_CUDA=OFF -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C "$build" importer_fuzzer
corpus=$build/corpus
mkdir -p "$corpus"
for t in test_relu test_add_bcast test_conv_with_strides_padding test_reshape_extended_dims \
         test_lstm_defaults test_gemm_default_no_bias test_slice; do
  f=/usr/share/libonnx-testdata/data/node/$t/model.onnx
  [[ -f $f ]] && cp "$f" "$corpus/$t.onnx"
done
# ASan's leak checker is off: a fuzz run checks crashes and hangs, not leaks.
ASAN_OPTIONS=detect_leaks=0 "$build/fuzz/importer_fuzzer" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 "$corpus"
echo "fuzz: no crash in ${seconds}s"
