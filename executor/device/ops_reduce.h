// Shared implementations of the reductions, Softmax/LogSoftmax and their
// gradients, and the classification losses. One functor call per output
// element (reductions) or per row/column (softmax), each folding its
// elements in the CPU kernels' fixed order, so the device gives bitwise the
// CPU's results. Labels are validated and loss coefficients computed on the
// host from the host copies of the small inputs.
#pragma once

#include <string>
#include <vector>

#include "executor/cpu/kernels/broadcast.h"
#include "executor/device/ops_shape.h"
#include "executor/device/reduce_math.h"
#include "executor/device/row_math.h"

namespace pipetrain::exec::device {

/// Output element o folds the input over the reduced dims, in row-major
/// order; an innermost reduced run is one reduce_row (as the CPU walks it).
/// m: per output, the max LogSumExp shifts by (else null).
template <Reduce kOp, typename T>
struct ReduceOut {
  const T* x;
  T* y;
  const T* m = nullptr;
  int kept_rank = 0, red_rank = 0;
  int64_t kept_dims[kMaxDims], kept_in[kMaxDims];  // output dims and their input strides
  int64_t red_dims[kMaxDims], red_in[kMaxDims];    // reduced dims (outside the run)
  int64_t run = 1;                                 // innermost reduced run (1: none)
  int64_t count = 1;                               // elements folded
  PIPETRAIN_HD void operator()(int64_t o) const {
    int64_t base = 0, rest = o;
    for (int d = kept_rank - 1; d >= 0; --d) {
      const int64_t q = rest / kept_dims[d];
      base += (rest - q * kept_dims[d]) * kept_in[d];
      rest = q;
    }
    int64_t total = 1;
    for (int d = 0; d < red_rank; ++d) total *= red_dims[d];
    const T mo = m ? m[o] : T{};
    acc_t<T> acc = reduce_init<kOp, T>();
    for (int64_t r = 0; r < total; ++r) {
      int64_t off = base, k = r;
      for (int d = red_rank - 1; d >= 0; --d) {
        const int64_t q = k / red_dims[d];
        off += (k - q * red_dims[d]) * red_in[d];
        k = q;
      }
      acc = run > 1 ? reduce_combine<kOp>(acc, reduce_row<kOp>(x + off, run, mo))
                    : reduce_element<kOp>(acc, x[off], mo);
    }
    y[o] = reduce_finish<kOp, T>(acc, count, mo);
  }
};

template <Reduce kOp, typename Exec>
void reduce_op(Exec& ex, DeviceOpArgs& a) {
  const KernelContext& h = *a.host;
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  const size_t rank = x.shape.size();
  std::vector<int64_t> axes = h.has_in(1) ? h.in(1).to_i64() : a.n().attr_ints("axes");
  if (axes.empty() && a.n().attr_int("noop_with_empty_axes", 0) != 0) {
    copy_op(ex, a);
    return;
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t ax : axes)
    reduced[static_cast<size_t>(ax < 0 ? ax + static_cast<int64_t>(rank) : ax)] = true;
  ir::Shape kept = x.shape;
  int64_t count = 1;
  for (size_t d = 0; d < rank; ++d)
    if (reduced[d]) {
      count *= x.shape[d];
      kept[d] = 1;
    }
  if (y.numel() == 0) return;
  // The CPU's coalesced walk: dims merged where both sides stay linear.
  const auto plan = cpu::plan_broadcast<1>(x.shape, {&kept});
  const std::vector<int64_t> in_st = ir::strides_of(plan.dims);
  with_storage(x.dtype, [&](auto tag) {
    using T = std::decay_t<decltype(tag)>;
    if constexpr (!std::is_same_v<T, uint8_t> &&
                  (std::is_same_v<T, float> || kReducesIntegers<kOp>)) {
      auto layout = [&](auto& f) {
        f.x = x.data<T>();
        f.y = y.data<T>();
        f.count = count;
        const size_t last = plan.dims.size() - 1;
        const bool inner_reduced = plan.strides[0][last] == 0;
        if (inner_reduced) f.run = plan.dims[last];
        for (size_t d = 0; d < plan.dims.size(); ++d) {
          if (inner_reduced && d == last) break;
          if (plan.strides[0][d] == 0) {
            f.red_dims[f.red_rank] = plan.dims[d];
            f.red_in[f.red_rank++] = in_st[d];
          } else {
            f.kept_dims[f.kept_rank] = plan.dims[d];
            f.kept_in[f.kept_rank++] = in_st[d];
          }
        }
        if (f.kept_rank > kMaxDims || f.red_rank > kMaxDims)
          throw UnsupportedOp("reductions over more than 8 dims on the device");
      };
      ReduceOut<kOp, T> f{};
      layout(f);
      if constexpr (kOp == Reduce::kLogSumExp) {
        // e^(x - max) cannot overflow: the max per output first.
        ReduceOut<Reduce::kMax, T> fm{};
        layout(fm);
        T* m = ex.template scratch<T>(y.numel());
        fm.y = m;
        ex.for_each(y.numel(), fm);
        f.m = m;
      }
      ex.for_each(y.numel(), f);
    }
  });
}

/// x viewed as (outer, n, inner) along the softmax axis.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

inline AxisView axis_view(const ir::Shape& shape, int64_t axis_attr) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  AxisView v;
  if (rank == 0) return v;  // a scalar is one row
  const int64_t axis = ir::normalize_axis(axis_attr, rank);
  for (int64_t d = 0; d < axis; ++d) v.outer *= shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) v.inner *= shape[static_cast<size_t>(d)];
  v.n = shape[static_cast<size_t>(axis)];
  return v;
}

/// softmax (or log_softmax) of column (o, k): with inner == 1 the row
/// reductions of the CPU's contiguous path, else its sequential strided path.
struct SoftmaxColumn {
  const float* x;
  float* y;
  AxisView v;
  bool log;
  PIPETRAIN_HD void operator()(int64_t c) const {
    const int64_t o = c / v.inner, k = c - o * v.inner;
    const float* xb = x + o * v.n * v.inner + k;
    float* yb = y + o * v.n * v.inner + k;
    const int64_t n = v.n, st = v.inner;
    if (st == 1) {
      const float m = max_row(xb, n);
      for (int64_t j = 0; j < n; ++j) yb[j] = exp_f32_normal(xb[j] - m);
      const float s = static_cast<float>(sum_row(yb, n));
      if (log) {
        const float ls = ::logf(s);
        for (int64_t j = 0; j < n; ++j) yb[j] = (xb[j] - m) - ls;
      } else {
        for (int64_t j = 0; j < n; ++j) yb[j] /= s;
      }
      return;
    }
    float m = xb[0];
    for (int64_t j = 1; j < n; ++j) m = nan_max(m, xb[j * st]);
    double s = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const float e = exp_f32_normal(xb[j * st] - m);
      yb[j * st] = e;
      s += e;
    }
    const float t = log ? static_cast<float>(::log(s)) : static_cast<float>(s);
    for (int64_t j = 0; j < n; ++j) {
      if (log)
        yb[j * st] = (xb[j * st] - m) - t;
      else
        yb[j * st] /= t;
    }
  }
};

/// Softmax: dX = Y (dY - sum(dY Y)); LogSoftmax: dX = dY - e^Y sum(dY).
struct SoftmaxGradColumn {
  const float* dy;
  const float* y;
  float* dx;
  AxisView v;
  bool log;
  PIPETRAIN_HD void operator()(int64_t c) const {
    const int64_t o = c / v.inner, k = c - o * v.inner;
    const int64_t at = o * v.n * v.inner + k, n = v.n, st = v.inner;
    const float *dyr = dy + at, *yr = y + at;
    float* dxr = dx + at;
    float s;
    if (st == 1) {
      s = log ? static_cast<float>(sum_row(dyr, n)) : static_cast<float>(dot_row(dyr, yr, n));
    } else {
      double acc = 0.0;
      for (int64_t j = 0; j < n; ++j)
        acc +=
            log ? static_cast<double>(dyr[j * st]) : static_cast<double>(dyr[j * st]) * yr[j * st];
      s = static_cast<float>(acc);
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = j * st;
      dxr[i] = log ? dyr[i] - exp_f32_normal(yr[i]) * s : yr[i] * (dyr[i] - s);
    }
  }
};

template <bool kLog, typename Exec>
void softmax_op(Exec& ex, DeviceOpArgs& a) {
  const AxisView v = axis_view(a.in[0].shape, a.n().attr_int("axis", -1));
  if (a.in[0].numel() == 0) return;
  ex.for_each(v.outer * v.inner,
              SoftmaxColumn{a.in[0].data<float>(), a.out[0].data<float>(), v, kLog});
}

template <bool kLog, typename Exec>
void softmax_grad_op(Exec& ex, DeviceOpArgs& a) {
  const AxisView v = axis_view(a.in[0].shape, a.n().attr_int("axis", -1));
  if (a.in[0].numel() == 0) return;
  ex.for_each(v.outer * v.inner, SoftmaxGradColumn{a.in[0].data<float>(), a.in[1].data<float>(),
                                                   a.out[0].data<float>(), v, kLog});
}

// --- classification losses --------------------------------------------------

/// Scores (N, C, D...) viewed as (N, C, D).
struct LossDims {
  int64_t n = 0, c = 0, d = 1;
};

inline LossDims loss_dims(const ir::Shape& scores) {
  LossDims r;
  r.n = scores[0];
  r.c = scores[1];
  for (size_t i = 2; i < scores.size(); ++i) r.d *= scores[i];
  return r;
}

/// Labels (host copy) as int64, each checked to be ignored or in [0, C).
inline std::vector<int64_t> checked_labels(const KernelContext& h, size_t input,
                                           const LossDims& dim, std::vector<uint8_t>* kept) {
  const ir::Node& node = h.n();
  const bool has_ignore = node.has_attr("ignore_index");
  const int64_t ignore = node.attr_int("ignore_index", 0);
  std::vector<int64_t> t = h.in(input).to_i64();
  kept->assign(t.size(), 0);
  for (size_t i = 0; i < t.size(); ++i) {
    if (has_ignore && t[i] == ignore) continue;
    if (t[i] < 0 || t[i] >= dim.c)
      throw RuntimeFault(node.describe() + ": label " + std::to_string(t[i]) + " at (" +
                         std::to_string(static_cast<int64_t>(i) / dim.d) + ", " +
                         std::to_string(static_cast<int64_t>(i) % dim.d) + ") is outside [0, " +
                         std::to_string(dim.c) + ")");
    (*kept)[i] = 1;
  }
  return t;
}

/// Per label: l = -w logp[label], the weight w (0 when ignored).
struct NllTerms {
  const float* logp;
  const int64_t* labels;
  const uint8_t* kept;
  const float* weight;  // (C) or null
  float *l, *w;
  LossDims dim;
  PIPETRAIN_HD void operator()(int64_t i) const {
    l[i] = 0.0f;
    w[i] = 0.0f;
    if (!kept[i]) return;
    const int64_t t = labels[i], nn = i / dim.d, d = i - nn * dim.d;
    w[i] = weight ? weight[t] : 1.0f;
    l[i] = -w[i] * logp[(nn * dim.c + t) * dim.d + d];
  }
};

/// The reduction, one thread: sums in (n, d) order in double, as the CPU.
struct NllReduce {
  const float *l, *w;
  float* out;
  int64_t m;
  int mode;  // 0 none, 1 sum, 2 mean
  PIPETRAIN_HD void operator()(int64_t) const {
    double total = 0.0, weight_sum = 0.0;
    for (int64_t i = 0; i < m; ++i) {
      if (mode == 0) out[i] = l[i];
      total += l[i];
      weight_sum += w[i];
    }
    if (mode == 1) out[0] = static_cast<float>(total);
    if (mode == 2) out[0] = static_cast<float>(total / weight_sum);
  }
};

inline int reduction_mode(const ir::Node& n) {
  const std::string r = n.attr_string("reduction", "mean");
  return r == "none" ? 0 : r == "sum" ? 1 : 2;
}

template <typename Exec>
void nll_from_logp(Exec& ex, DeviceOpArgs& a, const float* logp) {
  const LossDims dim = loss_dims(a.in[0].shape);
  std::vector<uint8_t> kept;
  const std::vector<int64_t> labels = checked_labels(*a.host, 1, dim, &kept);
  const int64_t m = dim.n * dim.d;
  float* l = ex.template scratch<float>(m);
  float* w = ex.template scratch<float>(m);
  if (m > 0)
    ex.for_each(m, NllTerms{logp, ex.upload(labels), ex.upload(kept),
                            a.has_in(2) ? a.in[2].data<float>() : nullptr, l, w, dim});
  ex.for_each(1, NllReduce{l, w, a.out[0].data<float>(), m, reduction_mode(a.n())});
}

template <typename Exec>
void nll_op(Exec& ex, DeviceOpArgs& a) {
  nll_from_logp(ex, a, a.in[0].data<float>());
}

template <typename Exec>
void sce_op(Exec& ex, DeviceOpArgs& a) {
  const LossDims dim = loss_dims(a.in[0].shape);
  float* logp = a.has_out(1) ? a.out[1].data<float>() : ex.template scratch<float>(a.in[0].numel());
  const AxisView v{dim.n, dim.c, dim.d};
  if (a.in[0].numel() > 0)
    ex.for_each(v.outer * v.inner, SoftmaxColumn{a.in[0].data<float>(), logp, v, true});
  nll_from_logp(ex, a, logp);
}

/// Per label i: a[i] = w dL/dl_i (0 when ignored), computed on the host.
inline std::vector<float> loss_grad_coefficients(const KernelContext& h, const LossDims& dim,
                                                 std::vector<uint8_t>* kept,
                                                 std::vector<int64_t>* labels) {
  const ir::Node& node = h.n();
  const std::string reduction = node.attr_string("reduction", "mean");
  const ir::Tensor& dloss = h.in(0);
  const int64_t m = dim.n * dim.d;
  if (dloss.numel() != (reduction == "none" ? m : 1))
    throw ModelError(node.describe() + ": loss gradient " + ir::shape_str(dloss.shape()) +
                     " does not match reduction '" + reduction + "' over " + std::to_string(m) +
                     " labels");
  *labels = checked_labels(h, 2, dim, kept);
  const float* weight = h.has_in(3) ? h.in(3).data<float>() : nullptr;
  const float* g = dloss.data<float>();
  std::vector<float> coef(static_cast<size_t>(m), 0.0f);
  double weight_sum = 0.0;  // in (n, d) order, as the forward
  for (int64_t i = 0; i < m; ++i) {
    if (!(*kept)[static_cast<size_t>(i)]) continue;
    const float w = weight ? weight[(*labels)[static_cast<size_t>(i)]] : 1.0f;
    coef[static_cast<size_t>(i)] = w;
    weight_sum += w;
  }
  const float scale =
      reduction == "mean" ? static_cast<float>(static_cast<double>(g[0]) / weight_sum) : g[0];
  for (int64_t i = 0; i < m; ++i)
    if ((*kept)[static_cast<size_t>(i)])
      coef[static_cast<size_t>(i)] *= reduction == "none" ? g[i] : scale;
  return coef;
}

/// dX (N, C, D): NLL: -a at the label, 0 elsewhere; SCE: softmax * a, minus
/// a at the label. One call per element.
struct LossGrad {
  const float* p;  // softmax (SCE) or null (NLL)
  float* dx;
  const float* coef;
  const int64_t* labels;
  const uint8_t* kept;
  LossDims dim;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t d = i % dim.d, nc = i / dim.d, c = nc % dim.c, nn = nc / dim.c;
    const int64_t li = nn * dim.d + d;
    float v = p ? p[i] * coef[li] : 0.0f;
    if (kept[li] && labels[li] == c) v = p ? v - coef[li] : -coef[li];
    dx[i] = v;
  }
};

template <bool kSce, typename Exec>
void loss_grad_op(Exec& ex, DeviceOpArgs& a) {
  const LossDims dim = loss_dims(a.in[1].shape);
  std::vector<uint8_t> kept;
  std::vector<int64_t> labels;
  const std::vector<float> coef = loss_grad_coefficients(*a.host, dim, &kept, &labels);
  const int64_t total = a.out[0].numel();
  if (total == 0) return;
  float* p = nullptr;
  if (kSce) {
    p = ex.template scratch<float>(total);
    const AxisView v{dim.n, dim.c, dim.d};
    ex.for_each(v.outer * v.inner, SoftmaxColumn{a.in[1].data<float>(), p, v, false});
  }
  ex.for_each(total, LossGrad{p, a.out[0].data<float>(), ex.upload(coef), ex.upload(labels),
                              ex.upload(kept), dim});
}

}  // namespace pipetrain::exec::device
