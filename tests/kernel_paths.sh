#!/usr/bin/env bash
# Runs the kernel-level suites once per kernel path this CPU can select, so that
# a path the default choice never takes here is still tested: each OpenBLAS
# kernel set (OPENBLAS_CORETYPE), each oneDNN ISA cap (ONEDNN_MAX_CPU_ISA) and
# each activation layout (PIPETRAIN_BLOCKED_LAYOUT). Per path: the kernel check
# (executor_kernel_check_test), the Conv and BatchNorm fusion tests and the
# PyTorch reference's outputs and gradients (reference_check over the models
# the pytorch_reference test exported, all but vgg11: its 133M parameters were half
# of each path's time, and vgg11_bn has its layers, BatchNorm besides, at 64x64).
# A path the CPU cannot run is reported as skipped, with the flag it lacks, never
# as passed.
# Usage: tests/kernel_paths.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
models=$build/reference_models
# The models a path checks: links to all but vgg11 (above).
checked=$(mktemp -d)
trap 'rm -rf "$checked"' EXIT
if [[ -d $models ]]; then
  for m in "$models"/*/; do
    [[ $(basename "$m") == vgg11 ]] || ln -s "${m%/}" "$checked/$(basename "$m")"
  done
fi
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || { echo "$f"; return 1; }; done; }

echo "kernel paths: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "kernel paths: CPU flags that choose kernels:$(for f in sse4_1 avx avx2 fma avx512f avx512dq \
  avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_bf16; do has "$f" >/dev/null && printf ' %s' "$f"; done)"

# name | environment | flags the path needs
paths=(
  "openblas-Prescott|OPENBLAS_CORETYPE=Prescott|pni"
  "openblas-Sandybridge|OPENBLAS_CORETYPE=Sandybridge|avx"
  "openblas-Haswell|OPENBLAS_CORETYPE=Haswell|avx2 fma"
  "openblas-SkylakeX|OPENBLAS_CORETYPE=SkylakeX|avx512f avx512bw avx512dq avx512vl"
  "openblas-Cooperlake|OPENBLAS_CORETYPE=Cooperlake|avx512f avx512bw avx512dq avx512vl avx512_bf16"
  "onednn-SSE41|ONEDNN_MAX_CPU_ISA=SSE41|sse4_1"
  "onednn-AVX2|ONEDNN_MAX_CPU_ISA=AVX2|avx2"
  "onednn-AVX512_CORE|ONEDNN_MAX_CPU_ISA=AVX512_CORE|avx512f avx512bw avx512dq avx512vl"
  "layout-row-major|PIPETRAIN_BLOCKED_LAYOUT=off|"
  "layout-nhwc|PIPETRAIN_BLOCKED_LAYOUT=nhwc|"
)
passed=0 failed=0 skipped=0
# One path's suites, its log in $build/kernel_paths_NAME.log, its verdict in NAME.rc.
run_path() {  # name env
  local name=$1 env=$2 log=$build/kernel_paths_$1.log start=$SECONDS ok=1
  {
    env "$env" "$build/cli/pipetrain" doctor | grep -E '^(OpenBLAS|oneDNN|layout) |^kernel check' &&
      env "$env" "$build/tests/executor_kernel_check_test" &&
      env "$env" "$build/tests/ir_conv_fusion_test" &&
      env "$env" "$build/tests/ir_batchnorm_fusion_test" &&
      if [[ -d $models ]]; then env "$env" "$build/tests/reference_check" "$checked"; fi
  } >"$log" 2>&1 || ok=0
  echo "$ok $((SECONDS - start))" >"$log.rc"
}
# The paths run side by side, one per core (each is a chain of single processes),
# and report in the table's order.
runnable=()
for p in "${paths[@]}"; do
  IFS='|' read -r name env needs <<<"$p"
  # shellcheck disable=SC2086
  if ! lacks=$(has $needs); then
    echo "kernel paths: $name skipped (this CPU lacks $lacks)"
    skipped=$((skipped + 1))
    continue
  fi
  runnable+=("$p")
  while (($(jobs -rp | wc -l) >= $(nproc))); do wait -n || true; done
  rm -f "$build/kernel_paths_$name.log.rc"
  run_path "$name" "$env" &
done
wait
for p in "${runnable[@]}"; do
  IFS='|' read -r name env needs <<<"$p"
  log=$build/kernel_paths_$name.log
  read -r ok secs <"$log.rc" || { ok=0; secs=?; }
  summary=$(grep -E '^PyTorch reference:' "$log" | tail -1)
  if ((ok)); then
    echo "kernel paths: $name ($env) passed in $secs s${summary:+; $summary}"
    passed=$((passed + 1))
  else
    echo "kernel paths: $name ($env) FAILED; the end of $log:"
    tail -30 "$log"
    failed=$((failed + 1))
  fi
done
[[ -d $models ]] || echo "kernel paths: no exported reference models in $models: reference_check did not run"
echo "kernel-paths: $passed passed, $failed failed, $skipped skipped"
((failed == 0))
