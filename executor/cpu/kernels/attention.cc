// CPU kernels of the fused Attention and AttentionGrad: the shared
// implementation (device/ops_attention.h) run by the host Exec, so every
// backend computes attention the same way.
#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/shared_kernel.h"
#include "executor/device/ops_attention.h"

namespace pipetrain::exec::cpu {

using device::HostExec;

CpuKernel kernel_Attention() {
  return {shared_kernel<&device::attention_op<HostExec>>, {ir::DType::kF32}, 0};
}
CpuKernel kernel_AttentionGrad() {
  return {shared_kernel<&device::attention_grad_op<HostExec>>, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
