// CPU kernels for ops whose one implementation is the shared one
// (executor/device): the node's host tensors viewed as device tensors, run
// by the host Exec. Index and layout ops with no faster CPU form use it, so
// the CPU, portable and CUDA backends run the same code.
#pragma once

#include "executor/device/device_op.h"
#include "executor/device/host_exec.h"
#include "executor/kernel_context.h"

namespace pipetrain::exec::cpu {

/// Runs `Op` on `Exec` (the host Exec, or one with the CPU's own GEMM).
template <typename Exec, void (*Op)(Exec&, device::DeviceOpArgs&)>
void shared_kernel_on(KernelContext& ctx) {
  device::DeviceOpArgs args;
  args.host = &ctx;
  for (const ir::Tensor* t : ctx.inputs)
    args.in.push_back(t && t->defined() ? device::DeviceTensor{const_cast<void*>(t->raw()),
                                                               t->dtype(), t->shape()}
                                        : device::DeviceTensor{});
  for (ir::Tensor* t : ctx.outputs)
    args.out.push_back(t && t->defined() ? device::DeviceTensor{t->raw(), t->dtype(), t->shape()}
                                         : device::DeviceTensor{});
  Exec ex;
  Op(ex, args);
}

template <void (*Op)(device::HostExec&, device::DeviceOpArgs&)>
void shared_kernel(KernelContext& ctx) {
  shared_kernel_on<device::HostExec, Op>(ctx);
}

}  // namespace pipetrain::exec::cpu
