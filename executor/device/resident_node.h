// How a device backend runs one node against device residency (residency.h),
// written once for the portable and CUDA backends: a node outside a graph run
// gets a run of its own; the op's arguments are device copies of its inputs
// (brought to the host first where the op also reads them there; under bf16,
// rounded op-private copies) and fresh device buffers for its outputs.
#pragma once

#include "executor/device/bf16.h"
#include "executor/device/device_op.h"
#include "executor/device/residency.h"
#include "executor/kernel_context.h"

namespace pipetrain::exec::device {

/// Calls run() inside the active run, or inside a run of its own that ends
/// with ctx's outputs back on the host.
template <typename F>
void run_in_a_run(Residency& residency, const KernelContext& ctx, F&& run) {
  if (residency.active()) return run();
  residency.begin_run(ctx.values_version);
  try {
    run();
    for (const ir::Tensor* t : ctx.outputs)
      if (t && t->defined()) residency.to_host(*t);
  } catch (...) {
    residency.end_run();
    throw;
  }
  residency.end_run();
}

/// The device arguments of ctx's node (bf16: inputs rounded into ex's scratch).
template <typename Exec>
DeviceOpArgs resident_args(Residency& residency, Exec& ex, const KernelContext& ctx, bool bf16) {
  DeviceOpArgs args;
  args.host = &ctx;
  const std::string& op = ctx.n().op_type;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const ir::Tensor* t = ctx.inputs[i];
    if (!t || !t->defined()) {
      args.in.push_back({});
      continue;
    }
    if (read_on_host(op, *t)) residency.to_host(*t);
    void* p = const_cast<void*>(residency.input(*t, ctx.in_is_value(i)));
    if (bf16 && t->dtype() == ir::DType::kF32) {  // a rounded copy: masters stay fp32
      float* r = ex.template scratch<float>(t->numel());
      ex.for_each(t->numel(), RoundedBf16Copy{static_cast<const float*>(p), r});
      p = r;
    }
    args.in.push_back({p, t->dtype(), t->shape()});
  }
  for (ir::Tensor* t : ctx.outputs)
    args.out.push_back(t && t->defined()
                           ? DeviceTensor{residency.output(*t), t->dtype(), t->shape()}
                           : DeviceTensor{});
  return args;
}

/// Rounds the op's float outputs to bf16 in place.
template <typename Exec>
void round_outputs_bf16(Exec& ex, const DeviceOpArgs& args) {
  for (const DeviceTensor& t : args.out)
    if (t.defined() && t.dtype == ir::DType::kF32)
      ex.for_each(t.numel(), RoundBf16{t.data<float>()});
}

}  // namespace pipetrain::exec::device
