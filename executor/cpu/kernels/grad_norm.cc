// PLACEHOLDER: CPU kernels of BatchNormalizationGrad, LayerNormalizationGrad (being written).
#include "executor/cpu/cpu_kernels.h"
#include "ir/error.h"

namespace pipetrain::exec::cpu {

namespace {
void not_yet(KernelContext& ctx) {
  throw UnsupportedOp(ctx.n().describe() + ": CPU kernel not written yet");
}
}  // namespace

CpuKernel kernel_BatchNormalizationGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}
CpuKernel kernel_LayerNormalizationGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
