// PLACEHOLDER: CPU kernels of MaxPoolGrad, AveragePoolGrad (being written).
#include "executor/cpu/cpu_kernels.h"
#include "ir/error.h"

namespace pipetrain::exec::cpu {

namespace {
void not_yet(KernelContext& ctx) {
  throw UnsupportedOp(ctx.n().describe() + ": CPU kernel not written yet");
}
}  // namespace

CpuKernel kernel_MaxPoolGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}
CpuKernel kernel_AveragePoolGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
