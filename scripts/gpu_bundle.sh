#!/usr/bin/env bash
# Makes gpu-bundle/ (git-ignored): everything a bare GPU machine needs to run
# benchmarks/gpu_check.sh, carried there beside the working tree (64 MiB in
# all). It holds one xz tarball, pipetrain-gpu.tar.xz, with
#   bin/   pipetrain, the CPU-vs-CUDA parity test, the NCCL contract test and
#          the training-step timer, built for sm_90 and any AVX2 CPU
#          (x86-64-v3), without MPI (the checks run threads), RUNPATH $ORIGIN/../lib;
#   lib/   every shared library they load that a bare machine lacks (oneDNN,
#          OpenBLAS, libonnx, protobuf, fmt, libgomp, ...), found with ldd;
#   data/fashion-mnist/  the first 20,000 training images and the 10,000 test
#          images, for the LeNet demo;
#   MANIFEST  the versions and the newest glibc/libstdc++ symbols they need.
# Left out on purpose, since the GPU machine has them (from the driver and
# PyTorch's pip packages) and they are far over the limit (cuBLAS alone is
# 500 MB): libcuda, libcudart, libcublas(Lt), libcudnn*, libnccl.
#
# Usage: scripts/gpu_bundle.sh [--check]   (then carry gpu-bundle to the GPU machine)
#   --check  then proves it without a GPU, as CI does: unpacks it into a fresh
#            prefix and runs `benchmarks/gpu_check.sh cpu` under `env -i`, so that
#            nothing but the bundle and the host's base libraries is seen.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
[[ ${1:-} == --check ]] && check=1
"$root/scripts/setup.sh"
build=$root/build-gpu-bundle
out=$root/gpu-bundle
limit_mib=64

# The libraries a run spends its time in (executor, partitioner, data: PIPETRAIN_HOT_OPT)
# at -O3, the CPU kernels the parity test and train_step compare with the GPU's among them;
# the code around them (the CLI, the tests; import and autodiff where not reused) at -O1:
# the code it runs once per job gains nothing from -O3.
# The cold libraries (import, IR, autodiff, the zoo) are the release tree's own objects
# where it built them for x86-64-v3 with this compiler (cmake/PortableObjects.cmake, which
# checks that): brought up to date there first, then linked here, not compiled again.
reuse=
if [[ -f $root/build/portable_objects.txt ]]; then
  ninja -C "$root/build" -j "$(nproc)" pipetrain_ir pipetrain_importer pipetrain_autodiff pipetrain_models \
    pipetrain_hf
  reuse=$root/build
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPIPETRAIN_CUDA=ON \
  "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -DPIPETRAIN_HOT_OPT=-O3 "-DPIPETRAIN_REUSE_OBJECTS=$reuse" \
  -DPIPETRAIN_CUDA_ARCHITECTURES=90 -DPIPETRAIN_MPI=OFF -DPIPETRAIN_NATIVE=OFF \
  -DPIPETRAIN_MARCH=x86-64-v3 -DPIPETRAIN_BENCHMARKS=ON \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN/../lib' >/dev/null
programs=(cli/pipetrain tests/executor_device_parity_test tests/executor_nccl_communicator_test
  benchmarks/train_step)
ninja -C "$build" -j "$(nproc)" "${programs[@]##*/}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/pipetrain-gpu
mkdir -p "$stage/bin" "$stage/lib" "$stage/data/fashion-mnist"
for p in "${programs[@]}"; do cp "$build/$p" "$stage/bin/"; done
strip --strip-unneeded "$stage"/bin/*

# What the GPU machine provides itself: glibc and the C++ runtime, the CUDA
# driver, and CUDA's libraries from PyTorch's pip packages.
provided_by_host() {
  case $1 in
    linux-vdso.so.* | ld-linux-x86-64.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
      librt.so.* | libstdc++.so.* | libgcc_s.so.*) return 0 ;;
    libcuda.so.* | libcudart.so.* | libcublas.so.* | libcublasLt.so.* | libcudnn*.so.* | libnccl.so.*)
      return 0 ;;
  esac
  return 1
}
# The programs load OpenBLAS's OpenMP build through their RUNPATH, which the
# bundle's $ORIGIN/../lib replaces: ldd is pointed at it to copy that one.
blas_openmp=/usr/lib/$(gcc -dumpmachine)/openblas-openmp
for p in "$stage"/bin/*; do
  LD_LIBRARY_PATH=$blas_openmp ldd "$p" | awk '$2 == "=>" { print $1, $3 }'
done | sort -u | while read -r name path; do
  provided_by_host "$name" && continue
  [[ $path == not ]] && { echo "gpu_bundle: $name is not found on this machine" >&2; exit 1; }
  cp -L "$path" "$stage/lib/$name"
done
strip --strip-unneeded "$stage"/lib/*

# The Fashion-MNIST subset, written as the IDX files the loader reads.
/usr/bin/python3 - "$stage/data/fashion-mnist" <<'EOF'
import gzip, os, struct, sys
src, dst = "/usr/share/datasets/fashion-mnist", sys.argv[1]
keep = {"train": 20000, "t10k": 10000}
for split, n in keep.items():
    for kind, magic, per in (("images-idx3", 2051, 784), ("labels-idx1", 2049, 1)):
        name = f"{split}-{kind}-ubyte.gz"
        with gzip.open(os.path.join(src, name)) as f:
            data = f.read()
        hdr = 16 if magic == 2051 else 8
        head = bytearray(data[:hdr])
        head[4:8] = struct.pack(">i", n)
        with gzip.open(os.path.join(dst, name), "wb", compresslevel=9) as f:
            f.write(bytes(head) + data[hdr:hdr + n * per])
EOF

newest() { objdump -T "$stage"/bin/* "$stage"/lib/* 2>/dev/null | grep -o "$1"'_[0-9.]*' | sort -uV | tail -1; }
{
  echo "pipetrain GPU bundle, $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME") with $(nvcc --version | tail -2 | head -1)"
  echo "cuda architectures: sm_90; cpu: x86-64-v3 (AVX2)"
  echo "needs from the host: $(newest GLIBC), $(newest GLIBCXX), the CUDA 13 driver, and"
  echo "  libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2"
  echo "bin: $(cd "$stage/bin" && echo *)"
  echo "lib: $(cd "$stage/lib" && echo *)"
  echo "data: fashion-mnist, 20000 train and 10000 test images"
} >"$stage/MANIFEST"

mkdir -p "$out"
# Blocks of 77 MiB: two threads on the tar (one block at -9 left a core idle for 65 s).
# -9: its 64 MiB window finds the four programs' shared code in one another. On the
# 184 MiB tar -3 saved 23 s of 48 but wrote 50.3 MiB against 42.2, too near the 64.
tar -C "$work" -cf - pipetrain-gpu | xz -9 -T "$(nproc)" --block-size=77MiB >"$out/pipetrain-gpu.tar.xz.tmp"
mv "$out/pipetrain-gpu.tar.xz.tmp" "$out/pipetrain-gpu.tar.xz"
cp "$stage/MANIFEST" "$out/MANIFEST"

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
bundle=$(du -cb "$out"/* | tail -1 | cut -f1)
unpacked=$(du -sb "$stage" | cut -f1)
tree=$(git -C "$root" ls-files -z | (cd "$root" && xargs -0 du -cb 2>/dev/null) | awk '$2 == "total" { s += $1 } END { print s + 0 }')
total=$((bundle + tree))
echo "gpu_bundle: $out: $(mib "$bundle") MiB ($(mib "$unpacked") MiB unpacked);" \
  "with the working tree ($(mib "$tree") MiB): $(mib "$total") of the $limit_mib MiB a GPU machine is sent"
if ((total > limit_mib * 1048576)); then
  echo "gpu_bundle: over the $limit_mib MiB a GPU machine is sent" >&2
  exit 1
fi

if ((check)); then
  proof=$(mktemp -d)
  trap 'rm -rf "$work" "$proof"' EXIT
  echo "gpu_bundle: CPU proof from a clean prefix ($proof)"
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$proof" PIPETRAIN_GPU_PREFIX="$proof/prefix" \
    OUT="$proof/out" bash "$root/benchmarks/gpu_check.sh" cpu
fi
