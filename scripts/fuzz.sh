#!/usr/bin/env bash
# Runs the libFuzzer targets (fuzz/: one per parser), built with clang, ASan
# and UBSan in the AddressSanitizer tree (scripts/sanitize.sh address builds
# them beside the sanitized tests), each for SECONDS on its seed corpus
# (fuzz/make_seeds.py). The corpora grow in build-address/corpus between runs;
# a crash leaves its input in build-address/crashes/ and fails the script.
# Usage: scripts/fuzz.sh [SECONDS per fuzzer, default 60] [FUZZER...]
set -euo pipefail
seconds=${1:-60}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-address
"$root/scripts/sanitize.sh" address --build-only fuzzers
fuzzers=("$@")
if [[ ${#fuzzers[@]} -eq 0 ]]; then
  fuzzers=(importer checkpoint npy npz csv idx text json graph_txt)
fi
seeds=$build/seeds
rm -rf "$seeds"
/usr/bin/python3 "$root/fuzz/make_seeds.py" "$seeds"
mkdir -p "$build/crashes"
# ASan's leak checker is off: a fuzz run checks crashes and hangs, not leaks.
export ASAN_OPTIONS=detect_leaks=0
# The fuzzers run side by side, one per core: each still gets its SECONDS, and the
# phase takes a core's share of them (CI's 2 cores: 9 fuzzers in 5 rounds, not 9).
run_one() {
  local name=$1_fuzzer corpus=$build/corpus/$1_fuzzer
  mkdir -p "$corpus"
  "$build/fuzz/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$build/crashes/$name-" \
    "$corpus" "$seeds/$name" >"$build/$name.log" 2>&1
}
declare -A pid_of
for f in "${fuzzers[@]}"; do
  while (($(jobs -rp | wc -l) >= $(nproc))); do wait -n || true; done
  echo "fuzz: ${f}_fuzzer for ${seconds}s"
  run_one "$f" &
  pid_of[$f]=$!
done
report=()
failed=0
for f in "${fuzzers[@]}"; do
  name=${f}_fuzzer
  log=$build/$name.log
  if ! wait "${pid_of[$f]}"; then
    tail -n 60 "$log"
    echo "fuzz: $name FAILED (input in $build/crashes/, log $log)" >&2
    failed=1
    continue
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  report+=("$(printf '  %-18s %10s executions, %5s inputs in its corpus' "$name" "$runs" \
              "$(find "$build/corpus/$name" -type f | wc -l)")")
done
((failed == 0)) || exit 1
echo "fuzz: no crash, no hang, ${seconds}s each"
printf '%s\n' "${report[@]}"
