// PLACEHOLDER: CPU kernels of ReluGrad, LeakyReluGrad, SigmoidGrad, TanhGrad, GeluGrad, ClipGrad,
// DropoutGrad, SoftmaxGrad, LogSoftmaxGrad (being written).
#include "executor/cpu/cpu_kernels.h"
#include "ir/error.h"

namespace pipetrain::exec::cpu {

namespace {
void not_yet(KernelContext& ctx) {
  throw UnsupportedOp(ctx.n().describe() + ": CPU kernel not written yet");
}
}  // namespace

CpuKernel kernel_ReluGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}
CpuKernel kernel_LeakyReluGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}
CpuKernel kernel_SigmoidGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}
CpuKernel kernel_TanhGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}
CpuKernel kernel_GeluGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}
CpuKernel kernel_ClipGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}
CpuKernel kernel_DropoutGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}
CpuKernel kernel_SoftmaxGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}
CpuKernel kernel_LogSoftmaxGrad() {
  return {not_yet, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
