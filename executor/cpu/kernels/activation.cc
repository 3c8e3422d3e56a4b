// CPU kernels of the activations, Softmax/LogSoftmax and Dropout. Math in
// f32; f16/bf16 run through f32 (with_f32).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/broadcast.h"
#include "executor/cpu/kernels/ew_common.h"
#include "executor/cpu/kernels/vec_math.h"
#include "executor/device/clip_bounds.h"
#include "executor/device/dropout_rule.h"

namespace pipetrain::exec::cpu {

void softmax_f32(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  if (outer * n * inner == 0) return;
  if (inner == 1) {
    // Rows are independent: split over threads, each row summed in its own order.
    parallel_for(
        outer, outer * n * kMathCost,
        [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o) {
            const float* xr = x + o * n;  // (n)
            float* yr = y + o * n;        // (n)
            const float m = max_row(xr, n);
            for (int64_t j = 0; j < n; ++j) yr[j] = exp_f32_normal(xr[j] - m);
            const float s = static_cast<float>(sum_row(yr, n));
            if (log) {
              // (x - m) - log s: folding m + log s first loses digits when |m| is large.
              const float ls = std::log(s);
              for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) - ls;
            } else {
              for (int64_t j = 0; j < n; ++j) yr[j] /= s;
            }
          }
        },
        1);
    return;
  }
  // Strided axis: reduce along j for `inner` columns at once (vectorised over k).
  parallel_for(
      outer, outer * n * inner * kMathCost,
      [&](int64_t begin, int64_t end) {
        std::vector<float> m(static_cast<size_t>(inner));   // (inner) max over j
        std::vector<double> s(static_cast<size_t>(inner));  // (inner) sum over j of exps
        std::vector<float> t(static_cast<size_t>(inner));   // (inner) log s or s, in f32
        for (int64_t o = begin; o < end; ++o) {
          const float* xb = x + o * n * inner;  // (n, inner)
          float* yb = y + o * n * inner;        // (n, inner)
          for (int64_t k = 0; k < inner; ++k) m[k] = xb[k];
          for (int64_t j = 1; j < n; ++j)
            for (int64_t k = 0; k < inner; ++k) m[k] = nan_max(m[k], xb[j * inner + k]);
          std::fill(s.begin(), s.end(), 0.0);
          for (int64_t j = 0; j < n; ++j)
            for (int64_t k = 0; k < inner; ++k) {
              const float e = exp_f32_normal(xb[j * inner + k] - m[k]);
              yb[j * inner + k] = e;
              s[k] += e;
            }
          if (log) {
            for (int64_t k = 0; k < inner; ++k) t[k] = static_cast<float>(std::log(s[k]));
            for (int64_t j = 0; j < n; ++j)
              for (int64_t k = 0; k < inner; ++k)
                yb[j * inner + k] = (xb[j * inner + k] - m[k]) - t[k];
          } else {
            for (int64_t k = 0; k < inner; ++k) t[k] = static_cast<float>(s[k]);
            for (int64_t j = 0; j < n; ++j)
              for (int64_t k = 0; k < inner; ++k) yb[j * inner + k] /= t[k];
          }
        }
      },
      1);
}

namespace {

using ir::DType;
using ir::Tensor;

const std::vector<DType> kFloat = {DType::kF32, DType::kF16, DType::kBF16};
const std::vector<DType> kNumeric = {DType::kF32, DType::kF16, DType::kBF16, DType::kI64,
                                     DType::kI32};

/// y[i] = fn(x[i]) over f32.
template <typename Fn>
void map_f32(KernelContext& ctx, Fn fn) {
  const float* x = ctx.in(0).data<float>();
  float* y = ctx.out(0).data<float>();
  for_each_index(ctx.in(0).numel(), kMathCost, [&](int64_t i) { y[i] = fn(x[i]); });
}

/// relu(x) = max(x, 0); NaN stays NaN.
void relu_kernel(KernelContext& ctx) {
  dispatch<float, int64_t, int32_t>(ctx.in(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = ctx.in(0).data<T>();
    T* y = ctx.out(0).data<T>();
    for_each_index(ctx.in(0).numel(), 1, [&](int64_t i) { y[i] = device::ReluFn{}(x[i]); });
  });
}

void leaky_relu_kernel(KernelContext& ctx) {
  map_f32(ctx, device::LeakyReluFn{ctx.n().attr_float("alpha", 0.01f)});
}

void elu_kernel(KernelContext& ctx) {
  map_f32(ctx, device::EluFn{ctx.n().attr_float("alpha", 1.0f)});
}
void selu_kernel(KernelContext& ctx) {
  map_f32(ctx, device::SeluFn{ctx.n().attr_float("alpha", 1.67326319217681884765625f),
                              ctx.n().attr_float("gamma", 1.05070102214813232421875f)});
}
void celu_kernel(KernelContext& ctx) {
  map_f32(ctx, device::CeluFn{ctx.n().attr_float("alpha", 1.0f)});
}
void thresholded_relu_kernel(KernelContext& ctx) {
  map_f32(ctx, device::ThresholdedReluFn{ctx.n().attr_float("alpha", 1.0f)});
}
void softplus_kernel(KernelContext& ctx) {
  map_f32(ctx, device::SoftplusFn{});
}
void softsign_kernel(KernelContext& ctx) {
  map_f32(ctx, device::SoftsignFn{});
}
void mish_kernel(KernelContext& ctx) {
  map_f32(ctx, device::MishFn{});
}

void hard_sigmoid_kernel(KernelContext& ctx) {
  map_f32(ctx, device::HardSigmoidFn{ctx.n().attr_float("alpha", 0.2f),
                                     ctx.n().attr_float("beta", 0.5f)});
}

void hard_swish_kernel(KernelContext& ctx) {
  map_f32(ctx, device::HardSwishFn{});
}

void sigmoid_kernel(KernelContext& ctx) {
  map_f32(ctx, device::SigmoidFn{});
}

void tanh_kernel(KernelContext& ctx) {
  map_f32(ctx, device::TanhFn{});
}

void gelu_kernel(KernelContext& ctx) {
  if (ctx.n().attr_string("approximate", "none") == "tanh")
    map_f32(ctx, device::GeluTanhFn{});
  else
    map_f32(ctx, device::GeluFn{});
}

/// clip(x) = min(max(x, lo), hi); min > max gives max everywhere, as ONNX
/// specifies. Bounds come from inputs 1/2, else the opset < 11 attributes.
void clip_kernel(KernelContext& ctx) {
  dispatch<float, int64_t, int32_t>(ctx.in(0).dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = ctx.in(0).data<T>();
    T* y = ctx.out(0).data<T>();
    const device::ClipFn<T> clip = device::clip_bounds<T>(ctx);
    for_each_index(ctx.in(0).numel(), 1, [&](int64_t i) { y[i] = clip(x[i]); });
  });
}

/// Softmax (kLog = false) or LogSoftmax along `axis` (opset 13 semantics).
template <bool kLog>
void softmax_kernel(KernelContext& ctx) {
  const Tensor& xt = ctx.in(0);
  const ir::Shape& shape = xt.shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t axis = ir::normalize_axis(ctx.n().attr_int("axis", -1), rank);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[static_cast<size_t>(d)];
  softmax_f32(xt.data<float>(), ctx.out(0).data<float>(), outer, shape[static_cast<size_t>(axis)],
              inner, kLog);
}

/// Training: element i is kept when u_i >= ratio, u_i = hash(seed, i) / 2^24
/// uniform in [0, 1) (counter-based: the mask depends only on seed and i),
/// and kept elements are scaled by 1 / (1 - ratio). The seed is the `seed`
/// attribute when present, else the run's per-node seed. Inference copies.
void dropout_kernel(KernelContext& ctx) {
  const Tensor& xt = ctx.in(0);
  const int64_t n = xt.numel();
  const float* x = xt.data<float>();
  float* y = ctx.out(0).data<float>();
  uint8_t* mask = ctx.has_out(1) ? ctx.out(1).data<uint8_t>() : nullptr;  // same shape as x
  // An explicit training_mode input wins; without one the run decides.
  const bool training = ctx.has_in(2) ? ctx.in(2).at(0) != 0.0 : ctx.training;
  float ratio = ctx.n().attr_float("ratio", 0.5f);
  if (ctx.has_in(1)) ratio = static_cast<float>(ctx.in(1).at(0));
  if (!training || ratio <= 0.0f) {
    if (n) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
    if (mask) std::memset(mask, 1, static_cast<size_t>(n));
    return;
  }
  const uint64_t seed =
      ctx.n().has_attr("seed") ? static_cast<uint64_t>(ctx.n().attr_int("seed", 0)) : ctx.seed;
  const device::DropoutRule rule = device::dropout_rule(seed, ratio);
  for_each_index(n, kMathCost, [&](int64_t i) {
    const bool keep = rule.keeps(i);
    y[i] = select_f32(keep, x[i] * rule.scale, 0.0f);
    if (mask) mask[i] = keep;
  });
}

}  // namespace

CpuKernel kernel_Relu() {
  return {with_f32<relu_kernel>, kNumeric, 0};
}
CpuKernel kernel_LeakyRelu() {
  return {with_f32<leaky_relu_kernel>, kFloat, 0};
}
CpuKernel kernel_Elu() {
  return {with_f32<elu_kernel>, kFloat, 0};
}
CpuKernel kernel_Selu() {
  return {with_f32<selu_kernel>, kFloat, 0};
}
CpuKernel kernel_Celu() {
  return {with_f32<celu_kernel>, kFloat, 0};
}
CpuKernel kernel_ThresholdedRelu() {
  return {with_f32<thresholded_relu_kernel>, kFloat, 0};
}
CpuKernel kernel_Softplus() {
  return {with_f32<softplus_kernel>, kFloat, 0};
}
CpuKernel kernel_Softsign() {
  return {with_f32<softsign_kernel>, kFloat, 0};
}
CpuKernel kernel_Mish() {
  return {with_f32<mish_kernel>, kFloat, 0};
}
CpuKernel kernel_HardSigmoid() {
  return {with_f32<hard_sigmoid_kernel>, kFloat, 0};
}
CpuKernel kernel_HardSwish() {
  return {with_f32<hard_swish_kernel>, kFloat, 0};
}
CpuKernel kernel_Sigmoid() {
  return {with_f32<sigmoid_kernel>, kFloat, 0};
}
CpuKernel kernel_Tanh() {
  return {with_f32<tanh_kernel>, kFloat, 0};
}
CpuKernel kernel_Gelu() {
  return {with_f32<gelu_kernel>, kFloat, 0};
}
CpuKernel kernel_Clip() {
  return {with_f32<clip_kernel>, kNumeric, 0};
}
CpuKernel kernel_Softmax() {
  return {with_f32<softmax_kernel<false>>, kFloat, 0};
}
CpuKernel kernel_LogSoftmax() {
  return {with_f32<softmax_kernel<true>>, kFloat, 0};
}
CpuKernel kernel_Dropout() {
  return {with_f32<dropout_kernel>, kFloat, 0};
}

}  // namespace pipetrain::exec::cpu
