#!/usr/bin/env bash
# The configuration of stop 21's heap corruption ("corrupted size vs. prev_size"
# after Ctrl-C): the zoo MLP on digits, 1f1b-flush over 2 stages, 2 microbatches,
# interrupted with SIGINT at a random moment once training is under way. Repeats
# for the given minutes under glibc's heap checks (MALLOC_CHECK_=3 and the
# tcache off, so that a corrupted chunk aborts at the next malloc or free) or,
# with --valgrind, under valgrind memcheck, which also sees the writes of
# uninstrumented libraries (OpenBLAS, oneDNN, libgomp). A run fails when it
# exits other than 130 (interrupted, checkpoint written) or 0 (finished before
# the signal), or when glibc or valgrind reported anything.
# Valgrind emulates no AVX-512: that run builds its own pipetrain for AVX2
# (x86-64-v3) in build-valgrind/, and OpenBLAS and oneDNN take their AVX2 kernels.
# Usage: scripts/sigint_stress.sh [MINUTES=5] [--valgrind]   (needs build/cli/pipetrain)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
minutes=${1:-5}
valgrind=0
[[ ${2:-} == --valgrind ]] && valgrind=1
pipetrain=$root/build/cli/pipetrain
if ((valgrind)); then
  pipetrain=$root/build-valgrind/cli/pipetrain
  cmake -S "$root" -B "$root/build-valgrind" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPIPETRAIN_NATIVE=OFF -DPIPETRAIN_MARCH=x86-64-v3 -DPIPETRAIN_CUDA=OFF >/dev/null &&
    ninja -C "$root/build-valgrind" pipetrain >/dev/null || exit 2
fi
[[ -x $pipetrain ]] || { echo "sigint_stress: build pipetrain first (scripts/build.sh)"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$pipetrain" zoo export mlp -o "$work/mlp.onnx" >/dev/null

runs=0 bad=0
end=$((SECONDS + minutes * 60))
while ((SECONDS < end)); do
  runs=$((runs + 1))
  dir=$work/run$runs
  cmd=("$pipetrain" train "$work/mlp.onnx" --data digits --batch 32 --loss cross-entropy
       --optimizer sgd --lr 0.05 --momentum 0.9 --seed "$runs" --quiet --run-dir "$dir"
       --stages 2 --schedule 1f1b-flush --microbatches 2 --epochs 400 --checkpoint "$dir/ck.onnx")
  if ((valgrind)); then
    valgrind --tool=memcheck --smc-check=all-non-file --error-exitcode=99 --log-file="$work/vg$runs.txt" "${cmd[@]}" \
      >"$work/out$runs.txt" 2>&1 &
  else
    MALLOC_CHECK_=3 GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.check=3 \
      "${cmd[@]}" >"$work/out$runs.txt" 2>&1 &
  fi
  pid=$!
  # Under way: a step in metrics.jsonl; then a random 0 to 2 s more (10 to 20 under valgrind).
  for _ in $(seq 1 1200); do
    [[ -s $dir/metrics.jsonl ]] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  if ((valgrind)); then sleep $((10 + RANDOM % 10)); else sleep "0.$((RANDOM % 10))$((RANDOM % 10))"; fi
  kill -INT $pid 2>/dev/null
  wait $pid
  rc=$?
  problem=""
  [[ $rc == 130 || $rc == 0 ]] || problem="exit $rc"
  grep -qiE 'corrupt|double free|invalid (pointer|size)|malloc\(\)|free\(\)' "$work/out$runs.txt" &&
    problem="$problem, glibc: $(grep -iE 'corrupt|double free|invalid|malloc|free' "$work/out$runs.txt" | head -1)"
  if ((valgrind)) && ! grep -q 'ERROR SUMMARY: 0 errors' "$work/vg$runs.txt"; then
    problem="$problem, valgrind: $(grep 'ERROR SUMMARY' "$work/vg$runs.txt")"
    cp "$work/vg$runs.txt" "$root/build/sigint_stress_valgrind_$runs.txt" 2>/dev/null
  fi
  if [[ -n $problem ]]; then
    bad=$((bad + 1))
    echo "sigint_stress: run $runs: ${problem#, }"
    tail -5 "$work/out$runs.txt"
  fi
  rm -rf "$dir"
done
echo "sigint_stress: $runs interrupted runs in $minutes min ($([[ $valgrind == 1 ]] && echo valgrind memcheck || echo MALLOC_CHECK_=3, tcache off)), $bad with a problem"
((bad == 0))
