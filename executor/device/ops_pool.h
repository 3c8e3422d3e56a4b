// Shared implementations of MaxPool, AveragePool, GlobalAveragePool and the
// pooling gradients over windows padded to 3 spatial axes (window3.h). The
// forward ops compute one output element per call; the gradients gather into
// one input element per call from the outputs whose window covers it, adding
// in the order the CPU kernels scatter (grad_pool.cc), so sums round alike.
#pragma once

#include <limits>

#include "executor/cpu/kernels/pool_window.h"
#include "executor/device/ops_shape.h"
#include "executor/device/window_math.h"

namespace pipetrain::exec::device {

/// cpu::Window3 as a plain struct for device code.
struct Win3 {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  PIPETRAIN_HD int64_t in_size() const { return in[0] * in[1] * in[2]; }
  PIPETRAIN_HD int64_t out_size() const { return out[0] * out[1] * out[2]; }
  /// Output o's window along axis a: its start and valid taps.
  PIPETRAIN_HD void taps(int a, int64_t o, int64_t& st, int64_t& lo, int64_t& hi) const {
    st = o * s[a] - pb[a];
    valid_taps(st, k[a], d[a], in[a], lo, hi);
  }
  /// Valid taps along axis a, counting padding when include_pad.
  PIPETRAIN_HD int64_t count(int a, int64_t st, int64_t lo, int64_t hi, bool include_pad) const {
    if (include_pad) valid_taps(st + pb[a], k[a], d[a], in[a] + pb[a] + pe[a], lo, hi);
    return hi - lo;
  }
  /// Output element i (over planes): its plane and, per axis, the window's
  /// start and valid taps [lo, hi).
  PIPETRAIN_HD int64_t window_of(int64_t i, int64_t* st, int64_t* lo, int64_t* hi) const {
    const int64_t os = out_size(), pl = i / os, o = i - pl * os;
    const int64_t oi[3] = {o / (out[1] * out[2]), (o / out[2]) % out[1], o % out[2]};
    for (int a = 0; a < 3; ++a) taps(a, oi[a], st[a], lo[a], hi[a]);
    return pl;
  }
  /// Output index along axis a reading input index i through tap c, or -1.
  PIPETRAIN_HD int64_t output_of(int a, int64_t i, int64_t c) const {
    const int64_t num = i + pb[a] - c * d[a];
    if (num < 0 || num % s[a] != 0) return -1;
    const int64_t o = num / s[a];
    return o < out[a] ? o : -1;
  }
};

/// A window geometry as device code takes it.
inline Win3 win3(const ir::WindowGeometry& geo) {
  const cpu::Window3 w = cpu::to_window3(geo);
  Win3 r;
  for (int i = 0; i < 3; ++i) {
    r.in[i] = w.in[i];
    r.out[i] = w.out[i];
    r.k[i] = w.k[i];
    r.s[i] = w.s[i];
    r.d[i] = w.d[i];
    r.pb[i] = w.pb[i];
    r.pe[i] = w.pe[i];
  }
  return r;
}

inline Win3 pool_window(const ir::Node& n, const ir::Shape& x) {
  return win3(ir::window_geometry(n, ir::Shape(x.begin() + 2, x.end()), n.attr_ints("kernel_shape"),
                                  n.attr_int("ceil_mode", 0) != 0));
}

/// Output element i = (plane, o0, o1, o2): the max of its window; with
/// `where`, the first maximum's flat input index (storage_order 1: column-major).
struct MaxPoolOut {
  const float* x;
  float* y;
  int64_t* where;  // may be null
  Win3 w;
  bool col_major;
  PIPETRAIN_HD void operator()(int64_t i) const {
    int64_t st[3], lo[3], hi[3];
    const int64_t pl = w.window_of(i, st, lo, hi);
    const float* xp = x + pl * w.in_size();
    float best = -std::numeric_limits<float>::infinity();
    int64_t at = -1;
    for (int64_t a = lo[0]; a < hi[0]; ++a)
      for (int64_t b = lo[1]; b < hi[1]; ++b) {
        const int64_t row = ((st[0] + a * w.d[0]) * w.in[1] + st[1] + b * w.d[1]) * w.in[2];
        for (int64_t c = lo[2]; c < hi[2]; ++c) {
          const int64_t off = row + st[2] + c * w.d[2];
          const float v = xp[off];
          if (where) {
            if (v > best || at < 0) {
              best = v;
              at = off;
            }
          } else {
            best = best < v ? v : best;  // std::max, as the CPU's running max
          }
        }
      }
    y[i] = best;
    if (where) {
      int64_t flat = at;
      if (col_major && at >= 0) {
        const int64_t i2 = at % w.in[2], i1 = (at / w.in[2]) % w.in[1],
                      i0 = at / (w.in[1] * w.in[2]);
        flat = i0 + i1 * w.in[0] + i2 * w.in[0] * w.in[1];
      }
      where[i] = pl * w.in_size() + flat;
    }
  }
};

struct AveragePoolOut {
  const float* x;
  float* y;
  Win3 w;
  bool include_pad;
  PIPETRAIN_HD void operator()(int64_t i) const {
    int64_t st[3], lo[3], hi[3], count = 1;
    const int64_t pl = w.window_of(i, st, lo, hi);
    for (int a = 0; a < 3; ++a) count *= w.count(a, st[a], lo[a], hi[a], include_pad);
    const float* xp = x + pl * w.in_size();
    double sum = 0;
    for (int64_t a = lo[0]; a < hi[0]; ++a)
      for (int64_t b = lo[1]; b < hi[1]; ++b) {
        const float* row = xp + ((st[0] + a * w.d[0]) * w.in[1] + st[1] + b * w.d[1]) * w.in[2];
        for (int64_t c = lo[2]; c < hi[2]; ++c) sum += row[st[2] + c * w.d[2]];
      }
    y[i] = count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
  }
};

struct PlaneMean {
  const float* x;
  float* y;
  int64_t size;
  PIPETRAIN_HD void operator()(int64_t pl) const {
    double sum = 0;
    for (int64_t i = 0; i < size; ++i) sum += x[pl * size + i];
    y[pl] = size > 0 ? static_cast<float>(sum / static_cast<double>(size)) : 0.0f;
  }
};

/// MaxPoolGrad, pass 1: each output's argmax in its plane (-1: empty
/// window), found as the CPU finds it (first strict maximum, rows in order).
struct MaxPoolArgmax {
  const float* x;
  int64_t* where;
  Win3 w;
  PIPETRAIN_HD void operator()(int64_t i) const {
    int64_t st[3], lo[3], hi[3];
    const int64_t pl = w.window_of(i, st, lo, hi);
    const float* xp = x + pl * w.in_size();
    float best = 0.0f;
    int64_t at = -1;
    for (int64_t a = lo[0]; a < hi[0]; ++a)
      for (int64_t b = lo[1]; b < hi[1]; ++b) {
        const int64_t row = ((st[0] + a * w.d[0]) * w.in[1] + st[1] + b * w.d[1]) * w.in[2];
        for (int64_t c = lo[2]; c < hi[2]; ++c) {
          const int64_t off = row + st[2] + c * w.d[2];
          if (xp[off] > best || at < 0) {
            best = xp[off];
            at = off;
          }
        }
      }
    where[i] = at;
  }
};

/// Pooling gradients, gathered per input element. Max: the outputs whose
/// argmax it is, in output order. Average: dY / count of every output whose
/// window covers it, outputs (o0, o1) in order and along the last axis by tap.
struct PoolGradIn {
  const float* dy;
  const int64_t* where;  // max pool: argmax per output; null: average pool
  float* dx;
  Win3 w;
  bool include_pad;
  PIPETRAIN_HD float average_share(const float* dyp, int64_t o0, int64_t o1, int64_t o2) const {
    int64_t count = 1;
    const int64_t oi[3] = {o0, o1, o2};
    for (int a = 0; a < 3; ++a) {
      int64_t st, lo, hi;
      w.taps(a, oi[a], st, lo, hi);
      count *= w.count(a, st, lo, hi, include_pad);
    }
    const float g = dyp[(o0 * w.out[1] + o1) * w.out[2] + o2];
    return count > 0 ? g / static_cast<float>(count) : 0.0f;
  }
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t is = w.in_size(), pl = i / is, off = i - pl * is;
    const int64_t ii[3] = {off / (w.in[1] * w.in[2]), (off / w.in[2]) % w.in[1], off % w.in[2]};
    const float* dyp = dy + pl * w.out_size();
    float s = 0.0f;
    // Outputs along axes 0 and 1 in increasing order (taps decreasing).
    for (int64_t c0 = w.k[0] - 1; c0 >= 0; --c0) {
      const int64_t o0 = w.output_of(0, ii[0], c0);
      if (o0 < 0) continue;
      for (int64_t c1 = w.k[1] - 1; c1 >= 0; --c1) {
        const int64_t o1 = w.output_of(1, ii[1], c1);
        if (o1 < 0) continue;
        if (where) {
          for (int64_t c2 = w.k[2] - 1; c2 >= 0; --c2) {
            const int64_t o2 = w.output_of(2, ii[2], c2);
            const int64_t o = (o0 * w.out[1] + o1) * w.out[2] + o2;
            if (o2 >= 0 && where[pl * w.out_size() + o] == off) s += dyp[o];
          }
        } else {
          for (int64_t c2 = 0; c2 < w.k[2]; ++c2) {
            const int64_t o2 = w.output_of(2, ii[2], c2);
            if (o2 >= 0) s += average_share(dyp, o0, o1, o2);
          }
        }
      }
    }
    dx[i] = s;
  }
};

template <typename Exec>
void max_pool_op(Exec& ex, DeviceOpArgs& a) {
  const Win3 w = pool_window(a.n(), a.in[0].shape);
  ex.for_each(a.out[0].numel(), MaxPoolOut{a.in[0].data<float>(), a.out[0].data<float>(),
                                           a.has_out(1) ? a.out[1].data<int64_t>() : nullptr, w,
                                           a.n().attr_int("storage_order", 0) != 0});
}

template <typename Exec>
void average_pool_op(Exec& ex, DeviceOpArgs& a) {
  const Win3 w = pool_window(a.n(), a.in[0].shape);
  ex.for_each(a.out[0].numel(), AveragePoolOut{a.in[0].data<float>(), a.out[0].data<float>(), w,
                                               a.n().attr_int("count_include_pad", 0) != 0});
}

template <typename Exec>
void global_average_pool_op(Exec& ex, DeviceOpArgs& a) {
  const int64_t planes = a.in[0].shape[0] * a.in[0].shape[1];
  const int64_t size = planes == 0 ? 0 : a.in[0].numel() / planes;
  ex.for_each(planes, PlaneMean{a.in[0].data<float>(), a.out[0].data<float>(), size});
}

template <typename Exec>
void max_pool_grad_op(Exec& ex, DeviceOpArgs& a) {
  const Win3 w = pool_window(a.n(), a.in[1].shape);
  const int64_t planes = a.in[1].shape[0] * a.in[1].shape[1];
  int64_t* where = ex.template scratch<int64_t>(planes * w.out_size());
  ex.for_each(planes * w.out_size(), MaxPoolArgmax{a.in[1].data<float>(), where, w});
  ex.for_each(a.out[0].numel(),
              PoolGradIn{a.in[0].data<float>(), where, a.out[0].data<float>(), w, false});
}

template <typename Exec>
void average_pool_grad_op(Exec& ex, DeviceOpArgs& a) {
  const ir::Shape& shape = a.out[0].shape;
  if (shape.size() < 3)
    throw ModelError(a.n().describe() + ": input_shape " + ir::shape_str(shape) +
                     " is not (N, C, D...)");
  const Win3 w = pool_window(a.n(), shape);
  ex.for_each(a.out[0].numel(), PoolGradIn{a.in[0].data<float>(), nullptr, a.out[0].data<float>(),
                                           w, a.n().attr_int("count_include_pad", 0) != 0});
}

}  // namespace pipetrain::exec::device
