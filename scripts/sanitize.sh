#!/usr/bin/env bash
# Sanitizer builds of the tests (no CUDA; built beside ./build).
#   scripts/sanitize.sh address   AddressSanitizer + UndefinedBehaviorSanitizer (clang): the
#                                 unit tests and the CLI tests that train (pipelined included).
#                                 The same tree builds the libFuzzer targets (scripts/fuzz.sh
#                                 runs them): one clang build serves both.
#   scripts/sanitize.sh thread    ThreadSanitizer: the executor's tests (pipeline, stage
#                                 workers, communicators, data loader) and the pipelined CLI tests
#   scripts/sanitize.sh address --build-only [TARGET...]   configure and build, run nothing
# Any report fails the run. Leak checking is off: protobuf and ONNX keep
# process-lifetime registries that LeakSanitizer would list at exit.
set -euo pipefail
kind=${1:?usage: scripts/sanitize.sh address|thread [--build-only [TARGET...]]}
shift
build_only=0
if [[ ${1:-} == --build-only ]]; then
  build_only=1
  shift
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-$kind
# Before the OMP_NUM_THREADS=1 below: nproc honours it, and ctest -j 1 ran the TSan tests
# one after another.
jobs=$(nproc)
compilers=()
link=()
case $kind in
  address)
    targets=()  # all: the tests, the CLI and the fuzzers
    # clang, as libFuzzer needs: the fuzzers (fuzz/CMakeLists.txt) add coverage
    # instrumentation and all of UBSan to the parsing libraries they link. Elsewhere three
    # UBSan checks stay off, as they did under GCC, where they took compile time up two to
    # three times for little: a null dereference still faults under ASan, x86 loads
    # tolerate misalignment, and pointer-overflow needs a wrap of the address space.
    compilers=(CC=clang CXX=clang++)
    flags="-fsanitize=address,undefined -fno-sanitize=alignment,null,pointer-overflow"
    flags+=" -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    # Not here: the SentencePiece module is opened with RTLD_DEEPBIND, which ASan refuses;
    # mpi/gpu jobs, ONNX conformance, the PyTorch references and the accuracy runs are covered
    # by the plain build and are too slow under ASan; so are the Hugging Face tokenizer and
    # text classification scripts (Python training most of their time; the tokenizer code runs
    # here in data_hf_tokenizer_unit_test and data_text_rows_test).
    select=(-LE "mpi|gpu|conformance|reference|slow|docs"
            -E "sentencepiece|lm_train|^hf_tokenizer_test$|^text_classification_test$")
    # The unit tests' own sources uninstrumented (tests/CMakeLists.txt says why). The libraries
    # shared: static, each of the hundred executables held 20 MB of them (3.6 GB in all).
    extra=(-DPIPETRAIN_SANITIZE_TESTS=OFF -DPIPETRAIN_FUZZ=ON -DPIPETRAIN_SHARED_LIBS=ON)
    # -O0, with the libraries every training test runs through (executor, partitioner,
    # data: PIPETRAIN_HOT_OPT) at -O1: instrumented at half the compile time of -O1
    # throughout, and the tests keep their speed.
    opt=(-O0 -DPIPETRAIN_HOT_OPT=-O1)
    # lld: GNU ld took 141 s of CPU time over the tree's 104 links (the ASan runtime and
    # -g1), lld a quarter of that.
    link=(-fuse-ld=lld)
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ;;
  thread)
    flags="-fsanitize=thread"
    extra=(-DPIPETRAIN_SANITIZE_TESTS=ON)
    targets=(executor_pipeline_test executor_pipeline_fault_test executor_local_communicator_test
             executor_stage_program_test data_batch_loader_test importer_checkpoint_files_test
             pipetrain)
    select=(-R "^(executor_pipeline_test|executor_pipeline_fault_test|executor_local_communicator_test|executor_stage_program_test|data_batch_loader_test|importer_checkpoint_files_test|pipeline_train_test_[0-9]+)$")
    # -O1 throughout: at -O0 (the hot libraries at -O1, as ASan) the build took 8 minutes
    # but the pipelined CLI test 291 s against 156 at -O1, the set 13.5 min against 12.2.
    opt=(-O1 -DPIPETRAIN_HOT_OPT=)
    # libgomp is not instrumented: one OpenMP thread per worker, so its barriers never run.
    export OMP_NUM_THREADS=1
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
    ;;
  *) echo "usage: scripts/sanitize.sh address|thread" >&2; exit 2 ;;
esac
# The level above and -g1 (the build type "Sanitize" adds no flags of its own), with line
# numbers in reports. No benchmarks: no test runs them.
flags="${opt[0]} -g1 $flags"
# A tree configured with another compiler (GCC's ASan tree before clang's) starts over.
if ((${#compilers[@]})) && [[ -f $build/CMakeCache.txt ]] &&
  ! grep -q '^CMAKE_CXX_COMPILER:.*clang' "$build/CMakeCache.txt"; then
  rm -rf "$build"
fi
env "${compilers[@]}" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DPIPETRAIN_CUDA=OFF \
  -DPIPETRAIN_BENCHMARKS=OFF -DPIPETRAIN_WERROR=OFF "${opt[@]:1}" "${extra[@]}" \
  "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_C_FLAGS=$flags" \
  "-DCMAKE_EXE_LINKER_FLAGS=$flags ${link[*]}" "-DCMAKE_SHARED_LINKER_FLAGS=$flags ${link[*]}" >/dev/null
if ((build_only)); then
  ninja -C "$build" "$@"
  exit 0
fi
ninja -C "$build" "${targets[@]}"
cd "$build"
ctest --output-on-failure -j "$jobs" --timeout 1200 "${select[@]}"
echo "sanitize ($kind): no reports"
