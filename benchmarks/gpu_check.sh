#!/usr/bin/env bash
# The GPU check, in steps of a few minutes each, for a bare GPU machine (no
# Debian libraries, no registries): the programs come from gpu-bundle/
# (scripts/gpu_bundle.sh, made on a CPU machine and carried along), the CUDA
# libraries from the machine itself or from its PyTorch's pip packages.
#
# Usage: benchmarks/gpu_check.sh [STEP ...]        (no STEP: all)
#   env      the GPU, the bundle, where each library comes from (seconds)
#   parity   every op on CUDA against the CPU, and bf16 against the portable backend
#   nccl     the nccl communicator's contract, one thread per GPU (send/recv needs 2)
#   lenet    LeNet on Fashion-MNIST pipelined over 2 stages on one GPU, 1 epoch
#   traffic  host-device traffic of a LeNet step: device-resident tensors vs per-node staging
#   compare  ResNet-50 and Transformer training steps against PyTorch on the same GPU
#   all      the six above, in order (in place of `all` among other steps)
#   profile  where a ResNet-50 step's GPU time goes: pipetrain's time per op type with
#            each kernel waited for (CUDA_LAUNCH_BLOCKING), PyTorch with and without TF32
#   cpu      the bundle's proof without a GPU (CI): env, then the parity and nccl tests
#            (their CUDA cases skip), a pipelined LeNet on the CPU and a portable-backend step
#
# Every step writes <step>.log and a line of timings.tsv (step, exit code, seconds)
# to $OUT (the device tool sets it) or gpu-check-out/. The exit code is non-zero
# when any step failed; later steps still run, except after a failed env.
# Without gpu-bundle/ the programs come from build/ (a machine with Debian's libraries).
# Options (environment): STEPS=N training steps timed by compare (10);
# PIPETRAIN_GPU_PREFIX where the bundle is unpacked (/tmp/pipetrain-gpu).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-check-out}
mkdir -p "$out"
export OMP_WAIT_POLICY=passive
cuda_libs=(libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2)

say() { echo "gpu_check: $*" >&2; }

# --- the programs: unpacked from the bundle (once per bundle), or build/ ---
bundle=$root/gpu-bundle/pipetrain-gpu.tar.xz
if [[ -f $bundle ]]; then
  prefix=${PIPETRAIN_GPU_PREFIX:-/tmp/pipetrain-gpu}
  stamp=$(cksum <"$bundle")
  if [[ ! -f $prefix/.stamp || $(cat "$prefix/.stamp") != "$stamp" ]]; then
    rm -rf "$prefix" && mkdir -p "$prefix"
    if command -v xz >/dev/null; then
      xz -dc "$bundle" | tar -x -C "$prefix" --strip-components=1
    else  # a bare image may lack xz; Python's lzma reads it too
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
        "$bundle" "$prefix/.x" && mv "$prefix"/.x/pipetrain-gpu/* "$prefix"/
      rm -rf "$prefix/.x"
    fi || { say "could not unpack $bundle"; exit 1; }
    echo "$stamp" >"$prefix/.stamp"
  fi
  pipetrain=$prefix/bin/pipetrain
  parity_test=$prefix/bin/executor_device_parity_test
  nccl_test=$prefix/bin/executor_nccl_communicator_test
  train_step=$prefix/bin/train_step
  libdir=$prefix/lib
  export PIPETRAIN_FASHION_MNIST_DIR=$prefix/data/fashion-mnist
  work=$prefix/work
else
  build=$root/build
  pipetrain=$build/cli/pipetrain
  parity_test=$build/tests/executor_device_parity_test
  nccl_test=$build/tests/executor_nccl_communicator_test
  train_step=$build/benchmarks/train_step
  libdir=
  work=$build/gpu-check-work
  if [[ ! -x $pipetrain ]]; then
    say "no gpu-bundle/ and no build/: run scripts/gpu_bundle.sh on a CPU machine and bring gpu-bundle/ along"
    exit 1
  fi
fi
programs=("$pipetrain" "$parity_test" "$nccl_test" "$train_step")
mkdir -p "$work"

# --- Python: the one that has PyTorch (the GPU image's python3, else Debian's) ---
py=python3
"$py" -c 'import torch' 2>/dev/null || py=/usr/bin/python3

# --- CUDA's libraries: the system's, else those of PyTorch's pip packages ---
# The folder holding a library the loader's cache lacks: PyTorch's pip
# packages, else the toolkit's; nothing when the cache has it or none does.
pip_lib_dir() {
  /sbin/ldconfig -p 2>/dev/null | grep -qE "^\s+$1 " && return
  local d
  d=$("$py" - "$1" 2>/dev/null <<'EOF'
import glob, os, site, sys
for r in site.getsitepackages() + [site.getusersitepackages()]:
    for pattern in ("nvidia/*/lib/", "nvidia/*/*/lib/", "torch/lib/"):
        hits = glob.glob(os.path.join(r, pattern, sys.argv[1]))
        if hits:
            print(os.path.dirname(hits[0]))
            sys.exit(0)
EOF
  )
  for d in "$d" /usr/local/cuda/lib64 /usr/local/cuda/lib; do
    if [[ -n $d && -e $d/$1 ]]; then echo "$d" && return; fi
  done
}
# CUDA's libraries, then what cuDNN's runtime-compiled engines and cuBLAS may
# dlopen (without them they do without).
cuda_dirs=()
for lib in "${cuda_libs[@]}" libnvrtc.so.13 libnvJitLink.so.13; do
  d=$(pip_lib_dir "$lib")
  [[ -n $d ]] && cuda_dirs+=("$d")
done
ld_path=$libdir
for d in "${cuda_dirs[@]}"; do [[ :$ld_path: == *:$d:* ]] || ld_path=$ld_path:$d; done
export LD_LIBRARY_PATH=${ld_path#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# --- the steps ---
step_env() {
  nvidia-smi -L 2>/dev/null || echo "no NVIDIA GPU visible (nvidia-smi found none)"
  nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader 2>/dev/null
  echo "host: $(uname -srm); $(ldd --version | head -1); python: $py ($("$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null || echo "no torch"))"
  [[ -n $libdir ]] && sed 's/^/bundle: /' "$prefix/MANIFEST"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  local bad=0 name arrow path rest deps
  deps=$(for p in "${programs[@]}"; do ldd "$p" 2>&1; done)
  # An older glibc or libstdc++ than the bundle was built against.
  if grep -q "version .* not found" <<<"$deps"; then
    grep "version .* not found" <<<"$deps" | sed 's/^[[:space:]]*/too old here: /' | sort -u
    bad=1
  fi
  while read -r name arrow path rest; do
    [[ $arrow == "=>" ]] || continue
    if [[ $path == not ]]; then
      echo "missing: $name (needed by the programs; not on this machine)"
      bad=1
    elif [[ " ${cuda_libs[*]} " == *" $name "* ]]; then
      echo "cuda: $name from $path"
    elif [[ -n $libdir && $path != "$libdir"/* ]]; then
      case $name in
        libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libstdc++.so.* | \
          libgcc_s.so.* | libcuda.so.* | libcudnn_*.so.* | libnvrtc*.so.* | libnvJitLink.so.*) ;;
        *) echo "outside the bundle: $name from $path (the bundle should carry it)" && bad=1 ;;
      esac
    fi
  done < <(awk '{ print $1, $2, $3 }' <<<"$deps" | sort -u)
  ((bad == 0)) && echo "every library the programs load is found"
  return $bad
}

# A gtest program; with a GPU its CUDA cases must run, not skip.
gtest_step() {
  local program=$1 log
  log=$("$program" 2>&1)
  local rc=$?
  echo "$log" | grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure|error' | head -60
  ((rc == 0)) || return $rc
  if have_gpu && echo "$log" | grep -q "SKIPPED.*no CUDA device"; then
    say "$(basename "$program") skipped its CUDA cases although a GPU is here"
    return 1
  fi
}

have_gpu() { nvidia-smi -L >/dev/null 2>&1; }
need_gpu() { have_gpu || { say "no NVIDIA GPU here (nvidia-smi found none)"; return 1; }; }

lenet_model() {
  [[ -f $work/lenet.onnx ]] || "$pipetrain" zoo export lenet -o "$work/lenet.onnx" >/dev/null
}

train_lenet() {  # backend, then extra options
  local backend=$1
  shift
  lenet_model && "$pipetrain" train "$work/lenet.onnx" --data fashion-mnist --batch 64 \
    --loss cross-entropy --optimizer adam --lr 0.002 --seed 0 --stages 2 --schedule 1f1b \
    --backend "$backend" --run-dir "$work/lenet-$backend-run" "$@"
}

step_parity() { need_gpu && gtest_step "$parity_test"; }
step_nccl() {
  need_gpu || return 1
  echo "GPUs: $(nvidia-smi -L | wc -l) (send/recv is checked with 2 or more)"
  gtest_step "$nccl_test"
}
step_lenet() { need_gpu && train_lenet cuda --epochs 1; }
step_traffic() {
  need_gpu && lenet_model &&
    "$train_step" "$work/lenet.onnx" --backend cuda --batch 64 --steps 3 --warmup 1
}
step_compare() {
  need_gpu || return 1
  "$py" "$root/benchmarks/compare_training.py" --train-step "$train_step" --device cuda \
    --models resnet50,transformer --threads 1 --steps "${STEPS:-10}" --rounds 1
}
step_profile() {
  need_gpu || return 1
  local model=$work/resnet50.onnx
  [[ -f $model ]] || (cd "$root/benchmarks" && "$py" -c \
    'import sys, compare_training as c; c.export("resnet50", sys.argv[1])' "$model" 2>/dev/null) ||
    return 1
  echo "-- pipetrain, kernels asynchronous --"
  "$train_step" "$model" --backend cuda --batch 32 --steps 5 --warmup 2
  echo "-- pipetrain, each kernel waited for: time per op type --"
  CUDA_LAUNCH_BLOCKING=1 "$train_step" "$model" --backend cuda --batch 32 --steps 3 --warmup 1 \
    --profile
  echo "-- PyTorch, same step; cuDNN TF32 as PyTorch defaults (on), then off (pipetrain's FMA math) --"
  (cd "$root/benchmarks" && "$py" -c '
import sys, torch, compare_training as c
for tf32 in (True, False):
    torch.backends.cudnn.allow_tf32 = tf32
    ms = c.torch_step_ms(sys.argv[1], 1, 10, "cuda")
    print(f"PyTorch, cudnn.allow_tf32={tf32}: {ms:.1f} ms")
' resnet50)
}
step_cpu() {
  step_env || return 1
  echo "== parity (portable against cpu; the CUDA cases skip) ==" && gtest_step "$parity_test" &&
    echo "== nccl (skips) ==" && gtest_step "$nccl_test" &&
    echo "== LeNet, 2 stages on CPU threads, 40 steps ==" &&
    train_lenet cpu --epochs 1 --max-steps 40 &&
    echo "== a training step on the portable backend (the CUDA kernels' code) ==" &&
    "$train_step" "$work/lenet.onnx" --backend portable --batch 64 --steps 2 --warmup 1
}

steps=("$@")
((${#steps[@]})) || steps=(all)
expanded=()
for s in "${steps[@]}"; do  # `all` stands for the six, in place: `all profile` runs seven
  if [[ $s == all ]]; then expanded+=(env parity nccl lenet traffic compare); else expanded+=("$s"); fi
done
steps=("${expanded[@]}")
failed=0
for s in "${steps[@]}"; do
  if ! declare -F "step_$s" >/dev/null; then
    say "unknown step '$s' (env, parity, nccl, lenet, traffic, compare, all, profile, cpu)"
    exit 2
  fi
  echo "== $s =="
  start=$(date +%s)
  "step_$s" 2>&1 | tee "$out/$s.log"
  rc=${PIPESTATUS[0]}
  secs=$(($(date +%s) - start))
  printf '%s\t%d\t%d\n' "$s" "$rc" "$secs" >>"$out/timings.tsv"
  echo "== $s: $([[ $rc == 0 ]] && echo passed || echo "FAILED ($rc)") in ${secs} s =="
  if ((rc != 0)); then
    failed=1
    [[ $s == env ]] && break
  fi
done
exit $failed
