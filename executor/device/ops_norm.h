// Shared implementations of BatchNormalization, LayerNormalization and their
// gradients. Statistics: one functor call per channel (BatchNorm) or row
// (LayerNorm) folding in the CPU kernels' order (norm.cc, grad_norm.cc);
// then one call per element applies them.
#pragma once

#include <cmath>

#include "executor/device/fused_epilogue.h"
#include "executor/device/ops_shape.h"
#include "executor/device/row_math.h"

namespace pipetrain::exec::device {

// BatchNorm's sums over (N, D...) run in two levels, so a GPU has N x C
// threads at work rather than C: per (n, c) plane a sum in lanes (sum_row's
// order), then per channel the N plane sums in order. The CPU kernels add
// in the same order, so the results agree bitwise.

/// Per (plane, lane) j (as LaneSums): the sum of (x - mean[c])^2, c = plane mod C.
struct LaneSqDev {
  const float* x;
  const double* mean;  // (C)
  double* out;         // (N, C, kLanes)
  int64_t channels, size;
  PIPETRAIN_HD void operator()(int64_t j) const {
    const int64_t plane = j / kLanes;
    const float* p = x + plane * size;
    const double m = mean[plane % channels];
    double acc = 0;
    for (int64_t e = j % kLanes; e < size; e += kLanes) {
      const double d = p[e] - m;
      acc += d * d;
    }
    out[j] = acc;
  }
};

/// Per (plane, lane) j (as LaneSums): sum dY and sum dY (x - mean[c]).
struct LaneGradSums {
  const float *dy, *x;
  const double* mean;  // (C)
  double *g, *gx;      // (N, C, kLanes)
  int64_t channels, size;
  PIPETRAIN_HD void operator()(int64_t j) const {
    const int64_t plane = j / kLanes, at = plane * size;
    const double m = mean[plane % channels];
    double acc_g = 0, acc_gx = 0;
    for (int64_t e = j % kLanes; e < size; e += kLanes)
      add_grad_lane(dy + at, nullptr, x + at, e, m, &acc_g, &acc_gx);
    g[j] = acc_g;
    gx[j] = acc_gx;
  }
};

/// Per channel: y = (x - m[c]) a[c] + b[c] from the batch statistics
/// (training: mean and the sum of squared deviations; also the running
/// statistics) or the running ones. Centred first: x a + (b - m a) would
/// cancel where the mean is large against the spread.
struct BatchNormStats {
  const float *scale, *bias, *in_mean, *in_var;
  const double *batch_mean, *batch_sq;    // (C); training only
  float *m, *a, *b, *run_mean, *run_var;  // run_*: may be null
  double count;
  float eps, momentum;
  bool training;
  PIPETRAIN_HD void operator()(int64_t c) const {
    double mean = in_mean[c], var = in_var[c];
    if (training) {
      mean = count > 0 ? batch_mean[c] : 0.0;
      var = count > 0 ? batch_sq[c] / count : 0.0;
      if (run_mean)
        run_mean[c] = static_cast<float>(in_mean[c] * momentum + mean * (1.0 - momentum));
      if (run_var) run_var[c] = static_cast<float>(in_var[c] * momentum + var * (1.0 - momentum));
    }
    m[c] = static_cast<float>(mean);
    a[c] = static_cast<float>(scale[c] / ::sqrt(var + eps));
    b[c] = bias[c];
  }
};

/// out[i] = a[c] u[i] + b1[c] (v[i] - m[c]) + b0[c] (b1 null: (u[i] - m[c])
/// a[c] + b0[c]), c = (i / size) % channels.
struct ChannelAffine {
  const float *u, *v;
  float* out;
  const float *m, *a, *b1, *b0;
  int64_t channels, size;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t c = (i / size) % channels;
    out[i] = b1 ? a[c] * u[i] + b1[c] * (v[i] - m[c]) + b0[c] : (u[i] - m[c]) * a[c] + b0[c];
  }
};

/// Per channel of x (N, C, size): the batch mean and the sum of squared
/// deviations from it, through the two-level sums above.
template <typename Exec>
void batch_channel_stats(Exec& ex, const float* x, int64_t n_batch, int64_t channels, int64_t size,
                         double count, double* mean, double* sq) {
  const int64_t planes = n_batch * channels;
  double* part = ex.template scratch<double>(planes);            // (N, C)
  double* lanes = ex.template scratch<double>(planes * kLanes);  // (N, C, kLanes)
  plane_sums(ex, x, part, planes, size);
  ex.for_each(channels, ChannelTotal<double>{part, mean, n_batch, channels, count});
  ex.for_each(planes * kLanes, LaneSqDev{x, mean, lanes, channels, size});
  ex.for_each(planes, FoldPlaneLanes{lanes, part});
  ex.for_each(channels, ChannelTotal<double>{part, sq, n_batch, channels, 1.0});
}

template <typename Exec>
void batch_norm_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor& x = a.in[0];
  const int64_t n_batch = x.shape[0], channels = x.shape[1];
  const int64_t planes = n_batch * channels;
  const int64_t size = planes == 0 ? 0 : x.numel() / planes;
  const double count = static_cast<double>(n_batch * size);
  const bool training = a.n().attr_int("training_mode", 0) != 0;
  double* mean = ex.template scratch<double>(channels);  // (C)
  double* sq = ex.template scratch<double>(channels);    // (C)
  if (training && count > 0)
    batch_channel_stats(ex, x.data<float>(), n_batch, channels, size, count, mean, sq);
  float* mf = ex.template scratch<float>(channels);
  float* af = ex.template scratch<float>(channels);
  float* bf = ex.template scratch<float>(channels);
  ex.for_each(channels, BatchNormStats{a.in[1].data<float>(), a.in[2].data<float>(),
                                       a.in[3].data<float>(), a.in[4].data<float>(), mean, sq, mf,
                                       af, bf, a.has_out(1) ? a.out[1].data<float>() : nullptr,
                                       a.has_out(2) ? a.out[2].data<float>() : nullptr, count,
                                       a.n().attr_float("epsilon", 1e-5f),
                                       a.n().attr_float("momentum", 0.9f), training});
  if (size > 0) {
    ex.for_each(x.numel(), ChannelAffine{x.data<float>(), nullptr, a.out[0].data<float>(), mf, af,
                                         nullptr, bf, channels, size});
    fused_epilogue(ex, a.n(), a.out[0].data<float>(), a.has_in(5) ? a.in[5].data<float>() : nullptr,
                   x.numel());
  }
}

/// Per channel of BatchNormalizationGrad, from the channel totals: dB,
/// dscale and dX's coefficients.
struct BatchNormGradStats {
  const float* scale;
  const double *mean, *sq, *sum_g, *sum_gx;  // (C)
  float *dscale, *db;                        // may be null
  float *m, *a, *b1, *b0;                    // dX = a dY + b1 (x - m) + b0
  double count, eps;
  PIPETRAIN_HD void operator()(int64_t c) const {
    const double invstd = 1.0 / ::sqrt(sq[c] / count + eps);
    const double sum_gxhat = sum_gx[c] * invstd;
    if (db) db[c] = static_cast<float>(sum_g[c]);
    if (dscale) dscale[c] = static_cast<float>(sum_gxhat);
    const double ad = scale[c] * invstd;
    const double b1d = -ad * invstd * sum_gxhat / count;
    m[c] = static_cast<float>(mean[c]);
    a[c] = static_cast<float>(ad);
    b1[c] = static_cast<float>(b1d);
    b0[c] = static_cast<float>(-ad * sum_g[c] / count);
  }
};

template <typename Exec>
void batch_norm_grad_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor& x = a.in[1];
  const int64_t n_batch = x.shape[0], channels = x.shape[1];
  const int64_t planes = n_batch * channels;
  const int64_t size = planes == 0 ? 0 : x.numel() / planes;
  const double count = static_cast<double>(n_batch * size);
  if (count == 0) return;  // the zero-filled outputs are the gradients
  const float *xd = x.data<float>(), *dy = a.in[0].data<float>();
  double* part = ex.template scratch<double>(planes);     // (N, C)
  double* part_gx = ex.template scratch<double>(planes);  // (N, C)
  double* mean = ex.template scratch<double>(channels);   // (C)
  double* sq = ex.template scratch<double>(channels);
  double* sum_g = ex.template scratch<double>(channels);
  double* sum_gx = ex.template scratch<double>(channels);
  batch_channel_stats(ex, xd, n_batch, channels, size, count, mean, sq);
  double* lanes = ex.template scratch<double>(planes * kLanes);     // (N, C, kLanes)
  double* lanes_gx = ex.template scratch<double>(planes * kLanes);  // (N, C, kLanes)
  ex.for_each(planes * kLanes, LaneGradSums{dy, xd, mean, lanes, lanes_gx, channels, size});
  ex.for_each(planes, FoldPlaneLanes{lanes, part});
  ex.for_each(planes, FoldPlaneLanes{lanes_gx, part_gx});
  ex.for_each(channels, ChannelTotal<double>{part, sum_g, n_batch, channels, 1.0});
  ex.for_each(channels, ChannelTotal<double>{part_gx, sum_gx, n_batch, channels, 1.0});
  float* mf = ex.template scratch<float>(channels);
  float* af = ex.template scratch<float>(channels);
  float* b1 = ex.template scratch<float>(channels);
  float* b0 = ex.template scratch<float>(channels);
  ex.for_each(channels,
              BatchNormGradStats{a.in[2].data<float>(), mean, sq, sum_g, sum_gx,
                                 a.has_out(1) ? a.out[1].data<float>() : nullptr,
                                 a.has_out(2) ? a.out[2].data<float>() : nullptr, mf, af, b1, b0,
                                 count, static_cast<double>(a.n().attr_float("epsilon", 1e-5f))});
  if (a.has_out(0))
    ex.for_each(x.numel(),
                ChannelAffine{dy, xd, a.out[0].data<float>(), mf, af, b1, b0, channels, size});
}

/// A parameter broadcast to LayerNorm's normalised shape (aligned right;
/// its axes before the normalised ones have size 1).
inline StridedIndex<1> param_index(const ir::Shape& p, const ir::Shape& norm) {
  const size_t keep = std::min(p.size(), norm.size());
  const ir::Shape tail(p.end() - static_cast<std::ptrdiff_t>(keep), p.end());
  return broadcast_index<1>(norm, {&tail});
}

struct DenseParam {
  const float* p;
  float* out;
  StridedIndex<1> idx;
  PIPETRAIN_HD void operator()(int64_t i) const { out[i] = p[idx.offset(i, 0)]; }
};

struct LayerNormRow {
  const float *x, *scale, *bias;  // scale, bias dense (inner)
  float *y, *mean_out, *inv_out;  // *_out: may be null
  int64_t inner;
  float eps;
  PIPETRAIN_HD void operator()(int64_t r) const {
    const float* p = x + r * inner;
    float* q = y + r * inner;
    const double mean = sum_row(p, inner) / static_cast<double>(inner);
    const double sq = sum_sq_dev_row(p, inner, mean);
    const double inv = 1.0 / ::sqrt(sq / static_cast<double>(inner) + eps);
    for (int64_t i = 0; i < inner; ++i)
      q[i] = static_cast<float>((p[i] - mean) * inv) * scale[i] + bias[i];
    if (mean_out) mean_out[r] = static_cast<float>(mean);
    if (inv_out) inv_out[r] = static_cast<float>(inv);
  }
};

struct NormDims {
  ir::Shape norm;
  int64_t inner = 0, outer = 0;
};

inline NormDims norm_dims(const ir::Node& n, const ir::Shape& xs) {
  const int64_t rank = static_cast<int64_t>(xs.size());
  int64_t axis = n.attr_int("axis", -1);
  if (axis < 0) axis += rank;
  NormDims d;
  d.norm = ir::Shape(xs.begin() + axis, xs.end());
  d.inner = ir::numel(d.norm);
  d.outer = d.inner == 0 ? 0 : ir::numel(xs) / d.inner;
  return d;
}

template <typename Exec>
float* dense_param(Exec& ex, const DeviceTensor& p, const NormDims& d) {
  float* out = ex.template scratch<float>(d.inner);
  ex.for_each(d.inner, DenseParam{p.data<float>(), out, param_index(p.shape, d.norm)});
  return out;
}

template <typename Exec>
void layer_norm_op(Exec& ex, DeviceOpArgs& a) {
  const NormDims d = norm_dims(a.n(), a.in[0].shape);
  if (d.outer == 0) return;
  const float* scale = dense_param(ex, a.in[1], d);
  float* bias = nullptr;
  if (a.has_in(2)) {
    bias = dense_param(ex, a.in[2], d);
  } else {
    bias = ex.template scratch<float>(d.inner);
    ex.for_each(d.inner, Fill{bias, 0.0f});
  }
  ex.for_each(d.outer, LayerNormRow{a.in[0].data<float>(), scale, bias, a.out[0].data<float>(),
                                    a.has_out(1) ? a.out[1].data<float>() : nullptr,
                                    a.has_out(2) ? a.out[2].data<float>() : nullptr, d.inner,
                                    a.n().attr_float("epsilon", 1e-5f)});
}

/// Per row of LayerNormalizationGrad: its statistics (for the parameter
/// gradients) and dX.
struct LayerNormGradRow {
  const float *dy, *x, *scale;  // scale dense (inner)
  float* dx;                    // may be null
  double *mean, *invstd;        // (outer)
  int64_t inner;
  double eps;
  PIPETRAIN_HD void operator()(int64_t r) const {
    const float* p = x + r * inner;
    const float* g = dy + r * inner;
    const double m = sum_row(p, inner) / static_cast<double>(inner);
    const double inv = 1.0 / ::sqrt(sum_sq_dev_row(p, inner, m) / static_cast<double>(inner) + eps);
    mean[r] = m;
    invstd[r] = inv;
    if (!dx) return;
    double sum_g = 0, sum_gx = 0;
    sum_grad_row(g, scale, p, inner, m, &sum_g, &sum_gx);
    const double b1 = -inv * inv * inv * sum_gx / static_cast<double>(inner);
    const double b0 = -b1 * m - inv * sum_g / static_cast<double>(inner);
    const float af = static_cast<float>(inv), b1f = static_cast<float>(b1),
                b0f = static_cast<float>(b0);
    float* q = dx + r * inner;
    for (int64_t i = 0; i < inner; ++i) q[i] = af * (g[i] * scale[i]) + b1f * p[i] + b0f;
  }
};

/// Dense parameter gradients, column i summed over the rows in order.
struct LayerNormParamGrad {
  const float *dy, *x;
  const double *mean, *invstd;
  double *dscale, *db;  // dense (inner)
  int64_t outer, inner;
  PIPETRAIN_HD void operator()(int64_t i) const {
    double s = 0, b = 0;
    for (int64_t r = 0; r < outer; ++r) {
      const float g = dy[r * inner + i], p = x[r * inner + i];
      s += static_cast<double>(g) * ((p - mean[r]) * invstd[r]);
      b += g;
    }
    dscale[i] = s;
    db[i] = b;
  }
};

/// Folds a dense (inner) gradient into the parameter's shape: element j sums
/// the dense elements that read it, in increasing order.
struct FoldParam {
  const double* dense;
  float* out;
  StridedIndex<1> idx;
  int64_t inner;
  PIPETRAIN_HD void operator()(int64_t j) const {
    double s = 0;
    for (int64_t i = 0; i < inner; ++i)
      if (idx.offset(i, 0) == j) s += dense[i];
    out[j] = static_cast<float>(s);
  }
};

template <typename Exec>
void layer_norm_grad_op(Exec& ex, DeviceOpArgs& a) {
  const NormDims d = norm_dims(a.n(), a.in[1].shape);
  if (d.outer == 0) return;
  const float* scale = dense_param(ex, a.in[2], d);
  double* mean = ex.template scratch<double>(d.outer);
  double* invstd = ex.template scratch<double>(d.outer);
  ex.for_each(d.outer,
              LayerNormGradRow{a.in[0].data<float>(), a.in[1].data<float>(), scale,
                               a.has_out(0) ? a.out[0].data<float>() : nullptr, mean, invstd,
                               d.inner, static_cast<double>(a.n().attr_float("epsilon", 1e-5f))});
  if (!a.has_out(1) && !a.has_out(2)) return;
  double* dscale = ex.template scratch<double>(d.inner);
  double* db = ex.template scratch<double>(d.inner);
  ex.for_each(d.inner, LayerNormParamGrad{a.in[0].data<float>(), a.in[1].data<float>(), mean,
                                          invstd, dscale, db, d.outer, d.inner});
  const StridedIndex<1> idx = param_index(a.in[2].shape, d.norm);
  for (size_t k = 1; k <= 2; ++k)
    if (a.has_out(k))
      ex.for_each(a.out[k].numel(),
                  FoldParam{k == 1 ? dscale : db, a.out[k].data<float>(), idx, d.inner});
}

}  // namespace pipetrain::exec::device
