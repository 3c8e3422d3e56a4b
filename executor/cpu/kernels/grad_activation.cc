// CPU kernels of the activation gradients (schemas and math in ir/ops/grad.cc):
// one pass over dY and the saved forward tensor, f32. Each writes dX (it
// arrives zero-filled; nothing is accumulated across nodes here).
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/broadcast.h"
#include "executor/cpu/kernels/ew_common.h"
#include "executor/cpu/kernels/vec_math.h"

namespace pipetrain::exec::cpu {

namespace {

using ir::DType;
using ir::Tensor;

/// dx[i] = fn(dy[i], t[i]) with t = input 1 (Y or X, as the schema says).
template <typename Fn>
void map_grad(KernelContext& ctx, Fn fn) {
  const float* dy = ctx.in(0).data<float>();  // (any)
  const float* t = ctx.in(1).data<float>();   // as dy
  float* dx = ctx.out(0).data<float>();       // as dy
  const int64_t n = ctx.in(0).numel();
  assert(ctx.in(1).numel() == n);
  for_each_index(n, kMathCost, [&](int64_t i) { dx[i] = fn(dy[i], t[i]); });
}

void relu_grad(KernelContext& ctx) {
  map_grad(ctx, device::ReluGradFn{});
}

void leaky_relu_grad(KernelContext& ctx) {
  map_grad(ctx, device::LeakyReluGradFn{ctx.n().attr_float("alpha", 0.01f)});
}

void hard_sigmoid_grad(KernelContext& ctx) {
  map_grad(ctx, device::HardSigmoidGradFn{ctx.n().attr_float("alpha", 0.2f),
                                          ctx.n().attr_float("beta", 0.5f)});
}

void hard_swish_grad(KernelContext& ctx) {
  map_grad(ctx, device::HardSwishGradFn{});
}

void sigmoid_grad(KernelContext& ctx) {
  map_grad(ctx, device::SigmoidGradFn{});
}

void tanh_grad(KernelContext& ctx) {
  map_grad(ctx, device::TanhGradFn{});
}

void gelu_grad(KernelContext& ctx) {
  if (ctx.n().attr_string("approximate", "none") == "tanh")
    map_grad(ctx, device::GeluTanhGradFn{});
  else
    map_grad(ctx, device::GeluGradFn{});
}

/// (dY, X, min?, max?): dX = dY where min <= X <= max (bounds included, as
/// PyTorch's clamp backward), else 0; an absent bound is -inf / +inf. With
/// min > max no X passes (the forward outputs the constant max).
void clip_grad(KernelContext& ctx) {
  const float lo =
      ctx.has_in(2) ? static_cast<float>(ctx.in(2).at(0)) : -std::numeric_limits<float>::infinity();
  const float hi =
      ctx.has_in(3) ? static_cast<float>(ctx.in(3).at(0)) : std::numeric_limits<float>::infinity();
  map_grad(ctx, device::ClipGradFn{lo, hi});
}

/// (dY, mask, ratio?): dX = dY * mask / (1 - ratio), ratio 0.5 when absent.
/// The forward keeps nothing for ratio >= 1 (mask all false): dX = 0 then.
void dropout_grad(KernelContext& ctx) {
  const Tensor& mask_t = ctx.in(1);  // (as dY), bool
  assert(mask_t.dtype() == DType::kBool);
  const float ratio = ctx.has_in(2) ? static_cast<float>(ctx.in(2).at(0)) : 0.5f;
  const float scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
  const float* dy = ctx.in(0).data<float>();
  const uint8_t* mask = mask_t.data<uint8_t>();
  float* dx = ctx.out(0).data<float>();
  const int64_t n = ctx.in(0).numel();
  const device::DropoutGradFn grad{scale};
  for_each_index(n, 1, [&](int64_t i) { dx[i] = grad(dy[i], mask[i]); });
}

using device::dot_row;

/// Softmax: dX = Y (dY - sum_axis(dY Y)). LogSoftmax (kLog): Y = log p,
/// dX = dY - p sum_axis(dY) with p = e^Y. Both along `axis` of the tensor
/// viewed as (outer, n, inner); sums in double, in a fixed order.
template <bool kLog>
void softmax_grad(KernelContext& ctx) {
  const Tensor& dy_t = ctx.in(0);
  const ir::Shape& shape = dy_t.shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t axis = ir::normalize_axis(ctx.n().attr_int("axis", -1), rank);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[static_cast<size_t>(d)];
  const int64_t n = rank == 0 ? 1 : shape[static_cast<size_t>(axis)];  // a scalar is one row
  const float* dy = dy_t.data<float>();                                // (outer, n, inner)
  const float* y = ctx.in(1).data<float>();                            // (outer, n, inner)
  float* dx = ctx.out(0).data<float>();                                // (outer, n, inner)
  if (outer * n * inner == 0) return;
  if (inner == 1) {
    parallel_for(
        outer, outer * n * 2,
        [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) {
            const float* dyr = dy + o * n;  // (n)
            const float* yr = y + o * n;    // (n)
            float* dxr = dx + o * n;        // (n)
            if (kLog) {
              const float s = static_cast<float>(sum_row(dyr, n));
              for (int64_t j = 0; j < n; ++j) dxr[j] = dyr[j] - exp_f32_normal(yr[j]) * s;
            } else {
              const float s = static_cast<float>(dot_row(dyr, yr, n));
              for (int64_t j = 0; j < n; ++j) dxr[j] = yr[j] * (dyr[j] - s);
            }
          }
        },
        1);
    return;
  }
  // Strided axis: reduce along j for `inner` columns at once (vectorised over k).
  parallel_for(
      outer, outer * n * inner * 2,
      [&](int64_t begin, int64_t end) {
        std::vector<double> acc(static_cast<size_t>(inner));  // (inner)
        std::vector<float> s(static_cast<size_t>(inner));     // (inner)
        for (int64_t o = begin; o < end; ++o) {
          const float* dyb = dy + o * n * inner;  // (n, inner)
          const float* yb = y + o * n * inner;    // (n, inner)
          float* dxb = dx + o * n * inner;        // (n, inner)
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t j = 0; j < n; ++j)
            for (int64_t k = 0; k < inner; ++k)
              acc[k] += kLog ? static_cast<double>(dyb[j * inner + k])
                             : static_cast<double>(dyb[j * inner + k]) * yb[j * inner + k];
          for (int64_t k = 0; k < inner; ++k) s[k] = static_cast<float>(acc[k]);
          for (int64_t j = 0; j < n; ++j)
            for (int64_t k = 0; k < inner; ++k) {
              const int64_t i = j * inner + k;
              dxb[i] = kLog ? dyb[i] - exp_f32_normal(yb[i]) * s[k] : yb[i] * (dyb[i] - s[k]);
            }
        }
      },
      1);
}

}  // namespace

CpuKernel kernel_ReluGrad() {
  return {relu_grad, {DType::kF32}, 0};
}
CpuKernel kernel_LeakyReluGrad() {
  return {leaky_relu_grad, {DType::kF32}, 0};
}
CpuKernel kernel_HardSigmoidGrad() {
  return {hard_sigmoid_grad, {DType::kF32}, 0};
}
CpuKernel kernel_HardSwishGrad() {
  return {hard_swish_grad, {DType::kF32}, 0};
}
CpuKernel kernel_SigmoidGrad() {
  return {sigmoid_grad, {DType::kF32}, 0};
}
CpuKernel kernel_TanhGrad() {
  return {tanh_grad, {DType::kF32}, 0};
}
CpuKernel kernel_GeluGrad() {
  return {gelu_grad, {DType::kF32}, 0};
}
CpuKernel kernel_ClipGrad() {
  return {clip_grad, {DType::kF32}, 0};
}
CpuKernel kernel_DropoutGrad() {
  return {dropout_grad, {DType::kF32}, 0};
}
CpuKernel kernel_SoftmaxGrad() {
  return {softmax_grad<false>, {DType::kF32}, 0};
}
CpuKernel kernel_LogSoftmaxGrad() {
  return {softmax_grad<true>, {DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
