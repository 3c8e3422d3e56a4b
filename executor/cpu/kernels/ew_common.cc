#include "executor/cpu/kernels/ew_common.h"

#include <vector>

namespace pipetrain::exec::cpu {

namespace {

bool is_half(ir::DType t) {
  return t == ir::DType::kF16 || t == ir::DType::kBF16;
}

ir::Tensor to_f32(const ir::Tensor& t) {
  ir::Tensor r(ir::DType::kF32, t.shape());
  const uint16_t* src = t.data<uint16_t>();  // (numel) raw half bits
  float* dst = r.data<float>();
  const int64_t n = t.numel();
  if (t.dtype() == ir::DType::kF16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = ir::f16_to_f32(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = ir::bf16_to_f32(src[i]);
  }
  return r;
}

void from_f32(const ir::Tensor& f, ir::Tensor& t) {
  const float* src = f.data<float>();
  uint16_t* dst = t.data<uint16_t>();
  const int64_t n = t.numel();
  if (t.dtype() == ir::DType::kF16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = ir::f32_to_f16(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = ir::f32_to_bf16(src[i]);
  }
}

}  // namespace

bool has_half_tensor(const KernelContext& ctx) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.has_in(i) && is_half(ctx.in(i).dtype())) return true;
  for (size_t k = 0; k < ctx.outputs.size(); ++k)
    if (ctx.has_out(k) && is_half(ctx.out(k).dtype())) return true;
  return false;
}

void run_via_f32(KernelContext& ctx, KernelFn fn) {
  std::vector<ir::Tensor> ins(ctx.inputs.size()), outs(ctx.outputs.size());
  KernelContext inner = ctx;
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.has_in(i) && is_half(ctx.in(i).dtype())) {
      ins[i] = to_f32(ctx.in(i));
      inner.inputs[i] = &ins[i];
    }
  for (size_t k = 0; k < ctx.outputs.size(); ++k)
    if (ctx.has_out(k) && is_half(ctx.out(k).dtype())) {
      outs[k] = ir::Tensor(ir::DType::kF32, ctx.out(k).shape());
      inner.outputs[k] = &outs[k];
    }
  fn(inner);
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].defined()) from_f32(outs[k], ctx.out(k));
}

}  // namespace pipetrain::exec::cpu
