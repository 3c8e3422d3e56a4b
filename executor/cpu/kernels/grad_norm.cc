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
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/cpu/kernels/channel_pieces.h"
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

struct BatchNormGradArgs {
  const float *dy, *x, *scale;
  float* dx;      // null without
  float* dscale;  // null without
  float* db;      // null without
  double eps;
  int64_t n_batch;
  ChannelLayout dyl, xl, dxl;
};

BatchNormGradArgs batch_norm_grad_args(KernelContext& ctx) {
  BatchNormGradArgs a;
  const ir::Tensor& x = ctx.in(1);  // (N, C, D...)
  a.dy = ctx.in(0).data<float>();   // (N, C, D...)
  a.x = x.data<float>();
  a.scale = ctx.in(2).data<float>();                               // (C)
  a.dx = ctx.has_out(0) ? ctx.out(0).data<float>() : nullptr;      // (N, C, D...)
  a.dscale = ctx.has_out(1) ? ctx.out(1).data<float>() : nullptr;  // (C)
  a.db = ctx.has_out(2) ? ctx.out(2).data<float>() : nullptr;      // (C)
  a.eps = ctx.n().attr_float("epsilon", 1e-5f);
  a.n_batch = x.shape()[0];
  const int64_t channels = x.shape()[1];
  const int64_t size = a.n_batch * channels == 0 ? 0 : x.numel() / (a.n_batch * channels);
  a.dyl = a.xl = a.dxl = {channels, size, 0};
  const int64_t b = channel_block(channels);
  if (ctx.in_blocked(0)) a.dyl.block = b;
  if (ctx.in_blocked(1)) a.xl.block = b;
  if (ctx.has_out(0) && ctx.out_blocked(0)) a.dxl.block = b;
  return a;
}

// dX = a dY + b1 (x - mean) + b0 with a = scale invstd, b1 = -a invstd
// sum(dY xhat) / M, b0 = -a sum(dY) / M: the formula above per channel,
// centred first as the forward is. Also writes the channel's dscale and dB.
struct ChannelGrad {
  float m, a, b1, b0;
  float operator()(float dy, float x) const { return a * dy + b1 * (x - m) + b0; }
};
ChannelGrad channel_grad(const BatchNormGradArgs& g, int64_t c, double mean, double sq,
                         double sum_g, double sum_gx, double count) {
  const double invstd = 1.0 / std::sqrt(sq / count + g.eps);
  const double sum_gxhat = sum_gx * invstd;  // sum(dY * xhat)
  if (g.db) g.db[c] = static_cast<float>(sum_g);
  if (g.dscale) g.dscale[c] = static_cast<float>(sum_gxhat);
  const double a = g.scale[c] * invstd;
  const double b1 = -a * invstd * sum_gxhat / count;
  return {static_cast<float>(mean), static_cast<float>(a), static_cast<float>(b1),
          static_cast<float>(-a * sum_g / count)};
}

void batch_norm_grad_plain(const BatchNormGradArgs& g) {
  const int64_t n_batch = g.n_batch, channels = g.xl.channels, size = g.xl.size;
  const double count = static_cast<double>(n_batch * size);
  const float *xd = g.x, *dy = g.dy;
  // Channels are independent: split over threads, each summed in its own order.
  parallel_for(
      channels, n_batch * channels * size * 4,
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
            double s = 0, sx = 0;
            sum_grad(dy + off, nullptr, xd + off, size, mean, &s, &sx);
            sum_g += s;
            sum_gx += sx;
          }
          const ChannelGrad f = channel_grad(g, c, mean, sq, sum_g, sum_gx, count);
          if (!g.dx) continue;
          for (int64_t n = 0; n < n_batch; ++n) {
            const int64_t off = (n * channels + c) * size;
            for (int64_t i = 0; i < size; ++i) g.dx[off + i] = f(dy[off + i], xd[off + i]);
          }
        }
      },
      1);
}

// batch_norm_grad_plain where dY, X or dX is blocked: per piece of channels
// of one block (channel_pieces.h), the same sums in the same order and the
// same formulas, so the same bits. kAll: all three blocked (channels
// contiguous, a stride the vectoriser sees).
template <bool kAll>
void batch_norm_grad_pieces(const BatchNormGradArgs& g) {
  const int64_t size = g.xl.size;
  const int64_t xs = g.xl.step(), xc = kAll ? 1 : g.xl.channel_step();
  const int64_t gs = g.dyl.step(), gc = kAll ? 1 : g.dyl.channel_step();
  const int64_t ds = g.dxl.step(), dc = kAll ? 1 : g.dxl.channel_step();
  const int64_t block = std::max({g.xl.block, g.dyl.block, g.dxl.block});
  const std::vector<ChannelPiece> pieces = channel_pieces(g.xl.channels, block);
  const double count = static_cast<double>(g.n_batch * size);
  parallel_for(
      static_cast<int64_t>(pieces.size()), g.n_batch * g.xl.channels * size * 4,
      [&](int64_t p_begin, int64_t p_end) {
        for (int64_t p = p_begin; p < p_end; ++p) {
          const int64_t c0 = pieces[p].c0, w = pieces[p].w;
          double sum[kPiece] = {}, sq[kPiece] = {}, sum_g[kPiece] = {}, sum_gx[kPiece] = {};
          double* sums[] = {sum};
          double* rest[] = {sq, sum_g, sum_gx};
          for (int64_t n = 0; n < g.n_batch; ++n) {
            const float* xp = g.x + g.xl.plane(n, c0);
            add_plane_sums<1>(
                size, w, [&](int64_t i, int64_t j, double* t) { t[0] = xp[i * xs + j * xc]; },
                sums);
          }
          double mean[kPiece];
          for (int64_t j = 0; j < w; ++j) mean[j] = sum[j] / count;
          for (int64_t n = 0; n < g.n_batch; ++n) {
            const float* xp = g.x + g.xl.plane(n, c0);
            const float* gp = g.dy + g.dyl.plane(n, c0);
            add_plane_sums<3>(
                size, w,
                [&](int64_t i, int64_t j, double* t) {
                  const double d = xp[i * xs + j * xc] - mean[j];
                  const double dy = gp[i * gs + j * gc];
                  t[0] = d * d;
                  t[1] = dy;
                  t[2] = dy * d;
                },
                rest);
          }
          ChannelGrad f[kPiece];
          for (int64_t j = 0; j < w; ++j)
            f[j] = channel_grad(g, c0 + j, mean[j], sq[j], sum_g[j], sum_gx[j], count);
          if (!g.dx) continue;
          for (int64_t n = 0; n < g.n_batch; ++n) {
            const float* xp = g.x + g.xl.plane(n, c0);
            const float* gp = g.dy + g.dyl.plane(n, c0);
            float* dp = g.dx + g.dxl.plane(n, c0);
            for (int64_t i = 0; i < size; ++i)
              for (int64_t j = 0; j < w; ++j)
                dp[i * ds + j * dc] = f[j](gp[i * gs + j * gc], xp[i * xs + j * xc]);
          }
        }
      },
      1);
}

void batch_norm_grad(KernelContext& ctx) {
  const BatchNormGradArgs g = batch_norm_grad_args(ctx);
  if (g.n_batch * g.xl.size == 0) return;  // the zero-filled outputs are the gradients
  const bool all = g.xl.block && g.dyl.block && (g.dxl.block || !g.dx);
  if (all)
    batch_norm_grad_pieces<true>(g);
  else if (g.xl.block || g.dyl.block || g.dxl.block)
    batch_norm_grad_pieces<false>(g);
  else
    batch_norm_grad_plain(g);
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
