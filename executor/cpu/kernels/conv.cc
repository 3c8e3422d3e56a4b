// Conv and ConvTranspose (f32): oneDNN first, the plain im2col / col2im path
// where oneDNN cannot express the case (see conv_impl.h).
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/bf16.h"
#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/cpu/kernels/conv_impl.h"
#include "executor/device/elementwise_math.h"
#include "ir/error.h"

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
  if (!transposed && ctx.has_in(3)) {
    a.sum_data = ctx.in(3).data<float>();
    a.sum_blocked = ctx.in_blocked(3);
  }
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

// A fused Conv's Add and ReLU after a path that ran the convolution alone:
// y += residual, then max(y, 0) (the Add's and the Relu kernel's own
// functions). Elementwise, so in either layout (a blocked tensor has no
// padding lanes) once the residual is in y's.
void residual_and_relu(const ConvArgs& a) {
  const int64_t n = ir::numel(a.y);
  if (a.sum_data) {
    std::vector<float> copy;
    const float* r = a.sum_data;
    if (a.sum_blocked != a.y_blocked) {
      copy.resize(static_cast<size_t>(n));
      if (a.sum_blocked)
        from_blocked(a.sum_data, copy.data(), a.y);
      else
        to_blocked(a.sum_data, copy.data(), a.y);
      r = copy.data();
    }
    for (int64_t i = 0; i < n; ++i) a.y_data[i] += r[i];
  }
  if (a.relu)
    for (int64_t i = 0; i < n; ++i) a.y_data[i] = device::ReluFn{}(a.y_data[i]);
}

// The convolution alone, for paths that cannot add a residual: the ReLU
// then comes after the Add.
ConvArgs without_residual(const ConvArgs& a) {
  ConvArgs c = a;
  if (a.sum_data) c.relu = false;
  c.sum_data = nullptr;
  c.sum_blocked = false;
  return c;
}

void run_conv(KernelContext& ctx, bool transposed) {
  ConvArgs a = conv_args(ctx, transposed);
  if (ir::numel(a.y) == 0) return;
  const ConvArgs alone = without_residual(a);
  // A few output positions per image (ReLU included): GEMMs over the whole
  // batch beat oneDNN there, and the copies of such small tensors cost little.
  if (small_output_case(a)) {
    on_row_major_copies(alone, [](const ConvArgs& p) { conv_small_output(p); });
    if (a.sum_data) residual_and_relu(a);
    return;
  }
  if (conv_dnnl(a)) return;  // a fused residual and ReLU ran as its post-ops
  on_row_major_copies(alone, conv_plain);
  residual_and_relu(a);
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
            // A fused residual as the unfused graph has it: the bf16
            // convolution's output rounded, then the f32 Add and ReLU.
            const ConvArgs alone = without_residual(a);
            // A few output positions per image: the whole-batch GEMMs in bf16
            // (oneDNN's convolutions are as slow there in bf16 as in f32).
            if (conv_small_output(alone)) {
              round_bf16_in_place(a.y_data, ir::numel(a.y));
            } else if (!conv_dnnl(alone)) {
              if (a.sum_data)
                throw UnsupportedOp(ctx.n().describe() +
                                    ": bf16 with a fused residual needs oneDNN's convolution "
                                    "(import without the fusion passes: --no-fuse)");
              run_on_rounded_copies(ctx, kernel_Conv().fn);
            }
            if (a.sum_data) residual_and_relu(a);
          },
          {ir::DType::kF32},
          0};
}

CpuKernel kernel_ConvTranspose() {
  return {[](KernelContext& ctx) { run_conv(ctx, true); }, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
