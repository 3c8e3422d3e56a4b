#!/usr/bin/env bash
# Sanitizer builds of the tests (no CUDA; built beside ./build).
#   scripts/sanitize.sh address   AddressSanitizer + UndefinedBehaviorSanitizer: the unit tests
#                                 and the CLI tests that train (pipelined included)
#   scripts/sanitize.sh thread    ThreadSanitizer: the executor's tests (pipeline, stage
#                                 workers, communicators, data loader) and the pipelined CLI tests
# Any report fails the run. Leak checking is off: protobuf and ONNX keep
# process-lifetime registries that LeakSanitizer would list at exit.
set -euo pipefail
kind=${1:?usage: scripts/sanitize.sh address|thread}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-$kind
case $kind in
  address)
    targets=()  # all
    # Three UBSan checks stay off: they took GCC's compile time up two to three times
    # (portable_backend.cc 66 s against 30 at -O1) for little: a null dereference still
    # faults under ASan, x86 loads tolerate misalignment, and pointer-overflow needs a
    # wrap of the address space. The fuzzers (clang) keep all of UBSan.
    flags="-fsanitize=address,undefined -fno-sanitize=alignment,null,pointer-overflow"
    flags+=" -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    # Not here: the SentencePiece module is opened with RTLD_DEEPBIND, which ASan refuses;
    # mpi/gpu jobs, ONNX conformance, the PyTorch references and the accuracy runs are covered
    # by the plain build and are too slow under ASan.
    select=(-LE "mpi|gpu|conformance|reference|slow" -E "sentencepiece|lm_train")
    # The unit tests' own sources uninstrumented (tests/CMakeLists.txt says why).
    extra=(-DPIPETRAIN_SANITIZE_TESTS=OFF)
    # -O0, with the libraries every training test runs through (executor, partitioner,
    # data: PIPETRAIN_HOT_OPT) at -O1: GCC instruments at half the compile time of -O1
    # (portable_backend.cc 21 s against 41, cli/train.cc 15 against 24), and the tests
    # keep their speed (116 s in all against 96 at -O1; the phase 18 min against 20-22).
    opt=(-O0 -DPIPETRAIN_HOT_OPT=-O1)
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ;;
  thread)
    flags="-fsanitize=thread"
    extra=(-DPIPETRAIN_SANITIZE_TESTS=ON)
    targets=(executor_pipeline_test executor_pipeline_fault_test executor_local_communicator_test
             executor_stage_program_test data_batch_loader_test importer_checkpoint_files_test
             pipetrain)
    select=(-R "^(executor_pipeline_test|executor_pipeline_fault_test|executor_local_communicator_test|executor_stage_program_test|data_batch_loader_test|importer_checkpoint_files_test|pipeline_train_test)$")
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
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DPIPETRAIN_CUDA=OFF \
  -DPIPETRAIN_BENCHMARKS=OFF -DPIPETRAIN_WERROR=OFF "${opt[@]:1}" "${extra[@]}" \
  "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_C_FLAGS=$flags" \
  "-DCMAKE_EXE_LINKER_FLAGS=$flags" "-DCMAKE_SHARED_LINKER_FLAGS=$flags" >/dev/null
ninja -C "$build" "${targets[@]}"
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 1200 "${select[@]}"
echo "sanitize ($kind): no reports"
