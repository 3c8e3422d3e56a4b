// PLACEHOLDER: CPU kernels of LSTMGrad (being written).
#include "executor/cpu/cpu_kernels.h"
#include "ir/error.h"

namespace pipetrain::exec::cpu {

namespace {
void not_yet(KernelContext& ctx) {
  throw UnsupportedOp(ctx.n().describe() + ": CPU kernel not written yet");
}
}  // namespace

CpuKernel kernel_LSTMGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
