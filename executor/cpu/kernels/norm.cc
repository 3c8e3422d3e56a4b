// BatchNormalization and LayerNormalization (f32). Statistics accumulate in
// double, in a fixed order: interleaved lanes per row (per sample's plane for
// BatchNorm), so the loops vectorise and the device kernels match.
#include <cmath>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/ew_common.h"

namespace pipetrain::exec::cpu {

namespace {

void batch_norm(KernelContext& ctx) {
  const ir::Tensor& x = ctx.in(0);                 // (N, C, D...)
  const float* scale = ctx.in(1).data<float>();    // (C)
  const float* bias = ctx.in(2).data<float>();     // (C)
  const float* in_mean = ctx.in(3).data<float>();  // (C)
  const float* in_var = ctx.in(4).data<float>();   // (C)
  float* y = ctx.out(0).data<float>();             // (N, C, D...)
  const float eps = ctx.n().attr_float("epsilon", 1e-5f);
  const float momentum = ctx.n().attr_float("momentum", 0.9f);
  const bool training = ctx.n().attr_int("training_mode", 0) != 0;
  const int64_t n_batch = x.shape()[0], channels = x.shape()[1];
  const int64_t size = n_batch * channels == 0 ? 0 : x.numel() / (n_batch * channels);
  const float* xd = x.data<float>();
  // Channels are independent: split over threads, each summed in its own order.
  parallel_for(
      channels, x.numel() * 3,
      [&](int64_t c_begin, int64_t c_end) {
        for (int64_t c = c_begin; c < c_end; ++c) {
          double mean = in_mean[c], var = in_var[c];
          if (training) {
            // Batch statistics over (N, D...): two passes, biased variance; per
            // sample's plane a sum in lanes, planes in order (the device kernels'
            // two-level order, device/ops_norm.h).
            double sum = 0, sq = 0;
            for (int64_t n = 0; n < n_batch; ++n)
              sum += sum_row(xd + (n * channels + c) * size, size);
            double count = static_cast<double>(n_batch * size);
            mean = count > 0 ? sum / count : 0.0;
            for (int64_t n = 0; n < n_batch; ++n)
              sq += device::sum_sq_dev_row(xd + (n * channels + c) * size, size, mean);
            var = count > 0 ? sq / count : 0.0;
            if (ctx.has_out(1))
              ctx.out(1).data<float>()[c] =
                  static_cast<float>(in_mean[c] * momentum + mean * (1.0 - momentum));
            if (ctx.has_out(2))
              ctx.out(2).data<float>()[c] =
                  static_cast<float>(in_var[c] * momentum + var * (1.0 - momentum));
          }
          // y = (x - mean) a + B with a = scale / sqrt(var + eps): centred first, as
          // x a + (B - mean a) would cancel where the mean is large against the spread.
          const float mf = static_cast<float>(mean), bf = bias[c];
          const float af = static_cast<float>(scale[c] / std::sqrt(var + eps));
          for (int64_t n = 0; n < n_batch; ++n) {
            const float* p = xd + (n * channels + c) * size;
            float* q = y + (n * channels + c) * size;
            for (int64_t i = 0; i < size; ++i) q[i] = (p[i] - mf) * af + bf;
          }
        }
      },
      1);
}

// Expands a parameter broadcastable to the normalised shape `norm` into a
// dense (numel(norm)) vector.
std::vector<float> expand_param(const ir::Tensor& p, const ir::Shape& norm) {
  const ir::Shape& ps = p.shape();
  size_t rank = norm.size();
  std::vector<int64_t> pstride(rank, 0);
  int64_t acc = 1;
  for (size_t j = ps.size(); j-- > 0;) {
    size_t i = rank - ps.size() + j;  // aligned right; leading axes of p beyond norm are 1
    if (i < rank && ps[j] != 1) pstride[i] = acc;
    acc *= ps[j];
  }
  std::vector<float> out(static_cast<size_t>(ir::numel(norm)));
  std::vector<int64_t> idx(rank, 0);
  const float* d = p.data<float>();
  for (size_t t = 0; t < out.size(); ++t) {
    int64_t off = 0;
    for (size_t i = 0; i < rank; ++i) off += idx[i] * pstride[i];
    out[t] = d[off];
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < norm[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

using device::sum_sq_dev_row;

void layer_norm(KernelContext& ctx) {
  const ir::Tensor& x = ctx.in(0);  // (outer..., inner...)
  const ir::Shape& xs = x.shape();
  int64_t rank = x.rank();
  int64_t axis = ctx.n().attr_int("axis", -1);
  if (axis < 0) axis += rank;
  const float eps = ctx.n().attr_float("epsilon", 1e-5f);
  ir::Shape norm(xs.begin() + axis, xs.end());
  const int64_t inner = ir::numel(norm);
  const int64_t outer = inner == 0 ? 0 : x.numel() / inner;
  std::vector<float> scale = expand_param(ctx.in(1), norm);  // (inner)
  std::vector<float> bias = ctx.has_in(2) ? expand_param(ctx.in(2), norm)
                                          : std::vector<float>(static_cast<size_t>(inner), 0.0f);
  float* mean_out = ctx.has_out(1) ? ctx.out(1).data<float>() : nullptr;  // (outer)
  float* inv_out = ctx.has_out(2) ? ctx.out(2).data<float>() : nullptr;   // (outer)
  float* y = ctx.out(0).data<float>();
  parallel_for(
      outer, outer * inner * 3,
      [&](int64_t r_begin, int64_t r_end) {
        for (int64_t r = r_begin; r < r_end; ++r) {
          const float* p = x.data<float>() + r * inner;
          float* q = y + r * inner;
          // Lane-interleaved sums (ew_common.h): a fixed order that vectorises.
          const double mean = sum_row(p, inner) / static_cast<double>(inner);
          const double sq = sum_sq_dev_row(p, inner, mean);
          const double inv = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
          for (int64_t i = 0; i < inner; ++i)
            q[i] = static_cast<float>((p[i] - mean) * inv) * scale[static_cast<size_t>(i)] +
                   bias[static_cast<size_t>(i)];
          if (mean_out) mean_out[r] = static_cast<float>(mean);
          if (inv_out) inv_out[r] = static_cast<float>(inv);
        }
      },
      1);
}

}  // namespace

CpuKernel kernel_BatchNormalization() {
  return {batch_norm, {ir::DType::kF32}, 0};
}
CpuKernel kernel_LayerNormalization() {
  return {layer_norm, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
