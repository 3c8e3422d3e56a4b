// Conv and ConvTranspose (f32): oneDNN first, the plain im2col / col2im path
// where oneDNN cannot express the case (see conv_impl.h).
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/bf16.h"
#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/cpu/kernels/conv_impl.h"
#include "executor/device/elementwise_math.h"

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
  a.x_blocked = ctx.in_blocked(0);
  a.y_blocked = ctx.out_blocked(0);
  a.relu = !transposed && ctx.n().attr_string("activation", "") == "Relu";
  return a;
}

// Runs a path that computes row-major on row-major copies of whichever of
// X and Y the runner keeps blocked.
template <typename F>
void on_row_major_copies(const ConvArgs& a, F row_major) {
  if (!a.x_blocked && !a.y_blocked) return row_major(a);
  std::vector<float> x, y;
  ConvArgs plain = a;
  plain.x_data = row_major_data(a.x_data, a.x, a.x_blocked, &x);
  if (a.y_blocked) {
    y.resize(static_cast<size_t>(ir::numel(a.y)));
    plain.y_data = y.data();
  }
  plain.x_blocked = plain.y_blocked = false;
  row_major(plain);
  if (a.y_blocked) to_blocked(y.data(), a.y_data, a.y);
}

// max(y, 0) over a fused Conv's output, after a path that could not fuse it
// (the Relu kernel's own function).
void relu_in_place(float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = device::ReluFn{}(y[i]);
}

void run_conv(KernelContext& ctx, bool transposed) {
  ConvArgs a = conv_args(ctx, transposed);
  if (ir::numel(a.y) == 0) return;
  // A few output positions per image (ReLU included): GEMMs over the whole
  // batch beat oneDNN there, and the copies of such small tensors cost little.
  if (small_output_case(a))
    return on_row_major_copies(a, [](const ConvArgs& p) { conv_small_output(p); });
  if (conv_dnnl(a)) return;  // a fused ReLU ran as its post-op
  on_row_major_copies(a, conv_plain);
  // Elementwise, so in either layout (a blocked tensor has no padding lanes).
  if (a.relu) relu_in_place(a.y_data, ir::numel(a.y));
}

}  // namespace

CpuKernel kernel_Conv() {
  return {[](KernelContext& ctx) { run_conv(ctx, false); }, {ir::DType::kF32}, 0};
}

// oneDNN's bf16 convolution on a rounded copy of the bias (the rule rounds
// every float input); the fp32 kernel on rounded copies where oneDNN cannot.
CpuKernel kernel_bf16_Conv() {
  return {[](KernelContext& ctx) {
            ConvArgs a = conv_args(ctx, false);
            if (ir::numel(a.y) == 0) return;
            a.bf16 = true;
            std::vector<float> bias;
            if (a.b_data) {
              bias.assign(a.b_data, a.b_data + a.y[1]);
              round_bf16_in_place(bias.data(), a.y[1]);
              a.b_data = bias.data();
            }
            // A few output positions per image: the whole-batch GEMMs in bf16
            // (oneDNN's convolutions are as slow there in bf16 as in f32).
            if (conv_small_output(a))
              round_bf16_in_place(a.y_data, ir::numel(a.y));
            else if (!conv_dnnl(a))
              run_on_rounded_copies(ctx, kernel_Conv().fn);
          },
          {ir::DType::kF32},
          0};
}

CpuKernel kernel_ConvTranspose() {
  return {[](KernelContext& ctx) { run_conv(ctx, true); }, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
