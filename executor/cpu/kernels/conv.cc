// Conv and ConvTranspose (f32): oneDNN first, the plain im2col / col2im path
// where oneDNN cannot express the case (see conv_impl.h).
#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/conv_impl.h"

namespace pipetrain::exec::cpu {

namespace {

ConvArgs conv_args(KernelContext& ctx, bool transposed) {
  ConvArgs a;
  const ir::Tensor& x = ctx.in(0);  // (N, C, D...)
  const ir::Tensor& w = ctx.in(1);
  ir::Tensor& y = ctx.out(0);  // (N, M, O...)
  a.transposed = transposed;
  a.group = ctx.n().attr_int("group", 1);
  a.x = x.shape();
  a.w = w.shape();
  a.y = y.shape();
  ir::Shape in_spatial(a.x.begin() + 2, a.x.end());
  std::vector<int64_t> kernel(a.w.begin() + 2, a.w.end());
  a.geo = transposed ? ir::transpose_geometry(ctx.n(), in_spatial, kernel)
                     : ir::window_geometry(ctx.n(), in_spatial, kernel, /*ceil_mode=*/false);
  a.x_data = x.data<float>();
  a.w_data = w.data<float>();
  a.b_data = ctx.has_in(2) ? ctx.in(2).data<float>() : nullptr;
  a.y_data = y.data<float>();
  a.w_is_value = ctx.in_is_value(1);
  a.values_version = ctx.values_version;
  return a;
}

void run_conv(KernelContext& ctx, bool transposed) {
  ConvArgs a = conv_args(ctx, transposed);
  if (ir::numel(a.y) == 0) return;
  if (!conv_dnnl(a)) conv_plain(a);
}

}  // namespace

CpuKernel kernel_Conv() {
  return {[](KernelContext& ctx) { run_conv(ctx, false); }, {ir::DType::kF32}, 0};
}

CpuKernel kernel_ConvTranspose() {
  return {[](KernelContext& ctx) { run_conv(ctx, true); }, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
