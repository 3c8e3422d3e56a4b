// BatchNormalizationGrad and LayerNormalizationGrad (f32): (dY, X, scale) ->
// (dX, dscale, dB), each output computed only when present. The statistics
// are recomputed from X as the forward kernels (norm.cc) compute them: mean
// and biased variance in double, invstd = 1 / sqrt(var + epsilon). Over the M
// elements that share one mean, with xhat = (x - mean) * invstd:
//   dB = sum(dY),  dscale = sum(dY * xhat),
//   dX = scale * invstd / M * (M dY - sum(dY) - xhat * sum(dY * xhat))
// (BatchNormalization: per channel over (N, D...); LayerNormalization: per row
// over the axes from `axis` on, with g = dY * scale in place of dY inside dX).
// Sums run in double in interleaved lanes: a fixed order that vectorises.
#include <cmath>
#include <cstdint>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/ew_common.h"

namespace pipetrain::exec::cpu {

namespace {

double sum_sq_dev(const float* x, int64_t n, double mean) {
  return device::sum_sq_dev_row(x, n, mean);
}

void sum_grad(const float* dy, const float* scale, const float* x, int64_t n, double mean,
              double* sum_g, double* sum_gx) {
  device::sum_grad_row(dy, scale, x, n, mean, sum_g, sum_gx);
}

void batch_norm_grad(KernelContext& ctx) {
  const ir::Tensor& x = ctx.in(1);                                      // (N, C, D...)
  const float* dy = ctx.in(0).data<float>();                            // (N, C, D...)
  const float* scale = ctx.in(2).data<float>();                         // (C)
  float* dx = ctx.has_out(0) ? ctx.out(0).data<float>() : nullptr;      // (N, C, D...)
  float* dscale = ctx.has_out(1) ? ctx.out(1).data<float>() : nullptr;  // (C)
  float* db = ctx.has_out(2) ? ctx.out(2).data<float>() : nullptr;      // (C)
  const double eps = ctx.n().attr_float("epsilon", 1e-5f);
  const int64_t n_batch = x.shape()[0], channels = x.shape()[1];
  const int64_t size = n_batch * channels == 0 ? 0 : x.numel() / (n_batch * channels);
  const double count = static_cast<double>(n_batch * size);
  if (count == 0) return;  // the zero-filled outputs are the gradients
  const float* xd = x.data<float>();
  // Channels are independent: split over threads, each summed in its own order.
  parallel_for(
      channels, x.numel() * 4,
      [&](int64_t c_begin, int64_t c_end) {
        for (int64_t c = c_begin; c < c_end; ++c) {
          // Sums over (N, D...): per sample's contiguous block, blocks in order.
          double sum = 0;
          for (int64_t n = 0; n < n_batch; ++n)
            sum += sum_row(xd + (n * channels + c) * size, size);
          const double mean = sum / count;
          double sq = 0, sum_g = 0, sum_gx = 0;
          for (int64_t n = 0; n < n_batch; ++n) {
            const int64_t off = (n * channels + c) * size;
            sq += sum_sq_dev(xd + off, size, mean);
            double g = 0, gx = 0;
            sum_grad(dy + off, nullptr, xd + off, size, mean, &g, &gx);
            sum_g += g;
            sum_gx += gx;
          }
          const double invstd = 1.0 / std::sqrt(sq / count + eps);
          const double sum_gxhat = sum_gx * invstd;  // sum(dY * xhat)
          if (db) db[c] = static_cast<float>(sum_g);
          if (dscale) dscale[c] = static_cast<float>(sum_gxhat);
          if (!dx) continue;
          // dX = a dY + b1 (x - mean) + b0 with a = scale invstd, b1 = -a invstd
          // sum(dY xhat) / M, b0 = -a sum(dY) / M: the formula above per channel,
          // centred first as the forward is.
          const double a = scale[c] * invstd;
          const double b1 = -a * invstd * sum_gxhat / count;
          const float mf = static_cast<float>(mean), af = static_cast<float>(a);
          const float b1f = static_cast<float>(b1), b0f = static_cast<float>(-a * sum_g / count);
          for (int64_t n = 0; n < n_batch; ++n) {
            const int64_t off = (n * channels + c) * size;
            for (int64_t i = 0; i < size; ++i)
              dx[off + i] = af * dy[off + i] + b1f * (xd[off + i] - mf) + b0f;
          }
        }
      },
      1);
}

// For each element of the normalised shape `norm`, the offset of the element
// of a parameter broadcast to it (shape p, aligned right, size-1 axes repeat).
std::vector<int64_t> param_offsets(const ir::Shape& p, const ir::Shape& norm) {
  const size_t rank = norm.size();
  std::vector<int64_t> pstride(rank, 0);
  int64_t acc = 1;
  for (size_t j = p.size(); j-- > 0;) {
    // Axes of p before the normalised ones have size 1 (the shape rule).
    if (rank + j >= p.size() && p[j] != 1) pstride[rank + j - p.size()] = acc;
    acc *= p[j];
  }
  std::vector<int64_t> out(static_cast<size_t>(ir::numel(norm)));
  std::vector<int64_t> idx(rank, 0);
  for (size_t t = 0; t < out.size(); ++t) {
    int64_t off = 0;
    for (size_t i = 0; i < rank; ++i) off += idx[i] * pstride[i];
    out[t] = off;
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < norm[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

void layer_norm_grad(KernelContext& ctx) {
  const ir::Tensor& x = ctx.in(1);  // (outer..., inner...)
  const ir::Tensor& scale_t = ctx.in(2);
  const ir::Shape& xs = x.shape();
  const int64_t rank = x.rank();
  int64_t axis = ctx.n().attr_int("axis", -1);
  if (axis < 0) axis += rank;
  const double eps = ctx.n().attr_float("epsilon", 1e-5f);
  const ir::Shape norm(xs.begin() + axis, xs.end());
  const int64_t inner = ir::numel(norm);
  const int64_t outer = inner == 0 ? 0 : x.numel() / inner;
  const std::vector<int64_t> poff = param_offsets(scale_t.shape(), norm);  // (inner)
  std::vector<float> scale(static_cast<size_t>(inner));                    // dense (inner)
  for (int64_t i = 0; i < inner; ++i) scale[i] = scale_t.data<float>()[poff[i]];
  const float* xd = x.data<float>();
  const float* dy = ctx.in(0).data<float>();
  float* dx = ctx.has_out(0) ? ctx.out(0).data<float>() : nullptr;
  const bool param_grads = ctx.has_out(1) || ctx.has_out(2);
  // Per row its statistics and dX, rows split over threads; then the
  // parameters' dense sums over the rows in row order, columns split over
  // threads (each column's sum as on one thread), folded into the parameter's
  // shape at the end.
  std::vector<double> mean(static_cast<size_t>(outer)), invstd(static_cast<size_t>(outer));
  parallel_for(
      outer, outer * inner * 4,
      [&](int64_t r_begin, int64_t r_end) {
        for (int64_t r = r_begin; r < r_end; ++r) {
          const float* p = xd + r * inner;
          const float* g = dy + r * inner;
          const double m = sum_row(p, inner) / static_cast<double>(inner);
          const double is =
              1.0 / std::sqrt(sum_sq_dev(p, inner, m) / static_cast<double>(inner) + eps);
          mean[r] = m;
          invstd[r] = is;
          if (!dx) continue;
          double sum_g = 0, sum_gx = 0;  // g = dY * scale
          sum_grad(g, scale.data(), p, inner, m, &sum_g, &sum_gx);
          // dX = invstd (g - mean(g) - xhat mean(g xhat)) = a g + b1 x + b0.
          const double a = is;
          const double b1 = -is * is * is * sum_gx / static_cast<double>(inner);
          const double b0 = -b1 * m - is * sum_g / static_cast<double>(inner);
          const float af = static_cast<float>(a), b1f = static_cast<float>(b1);
          const float b0f = static_cast<float>(b0);
          float* q = dx + r * inner;
          for (int64_t i = 0; i < inner; ++i) q[i] = af * (g[i] * scale[i]) + b1f * p[i] + b0f;
        }
      },
      1);
  std::vector<double> dscale(param_grads ? inner : 0), db(param_grads ? inner : 0);  // (inner)
  if (param_grads)
    parallel_for(
        inner, outer * inner * 2,
        [&](int64_t i_begin, int64_t i_end) {
          for (int64_t r = 0; r < outer; ++r) {
            const float* p = xd + r * inner;
            const float* g = dy + r * inner;
            const double m = mean[r], is = invstd[r];
            for (int64_t i = i_begin; i < i_end; ++i) {
              dscale[i] += static_cast<double>(g[i]) * ((p[i] - m) * is);
              db[i] += g[i];
            }
          }
        },
        8);
  for (size_t k = 1; k <= 2; ++k) {
    if (!ctx.has_out(k)) continue;
    const std::vector<double>& dense = k == 1 ? dscale : db;
    std::vector<double> folded(static_cast<size_t>(scale_t.numel()), 0.0);
    for (int64_t i = 0; i < inner; ++i) folded[poff[i]] += dense[i];
    float* out = ctx.out(k).data<float>();
    for (size_t j = 0; j < folded.size(); ++j) out[j] = static_cast<float>(folded[j]);
  }
}

}  // namespace

CpuKernel kernel_BatchNormalizationGrad() {
  return {batch_norm_grad, {ir::DType::kF32}, 0};
}
CpuKernel kernel_LayerNormalizationGrad() {
  return {layer_norm_grad, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
