// Shared implementations of the scans along one axis: ArgMax / ArgMin,
// Hardmax, TopK and CumSum. One functor call per (outer, inner) column walks the axis in
// order, so the result is the same wherever it runs.
#pragma once

#include <string>
#include <vector>

#include "executor/device/ops_elementwise.h"
#include "executor/device/ops_reduce.h"

namespace pipetrain::exec::device {

/// ArgMax (or ArgMin) of a column: the first (or with last, the last) index
/// of the extreme value; a NaN is the extreme (numpy's and PyTorch's choice).
template <typename T>
struct ArgExtreme {
  const T* x;
  int64_t* y;
  AxisView v;
  bool max, last;
  PIPETRAIN_HD void operator()(int64_t c) const {
    const int64_t o = c / v.inner, k = c - o * v.inner;
    const T* col = x + o * v.n * v.inner + k;
    int64_t best = 0;
    T b = col[0];
    for (int64_t j = 1; j < v.n; ++j) {
      const T e = col[j * v.inner];
      if (b != b) break;  // NaN found: it stays
      const bool better = e != e || (max ? (last ? e >= b : e > b) : (last ? e <= b : e < b));
      if (better) {
        b = e;
        best = j;
      }
    }
    y[c] = best;
  }
};

template <typename Exec>
void arg_extreme_op(Exec& ex, DeviceOpArgs& a, bool max) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  const AxisView v = axis_view(x.shape, a.n().attr_int("axis", 0));
  if (y.numel() == 0) return;
  const bool last = a.n().attr_int("select_last_index", 0) != 0;
  with_storage(x.dtype, [&](auto tag) {
    using T = std::decay_t<decltype(tag)>;
    if constexpr (!std::is_same_v<T, uint8_t>)
      ex.for_each(v.outer * v.inner, ArgExtreme<T>{x.data<T>(), y.data<int64_t>(), v, max, last});
  });
}
template <typename Exec>
void arg_max_op(Exec& ex, DeviceOpArgs& a) {
  arg_extreme_op(ex, a, true);
}
template <typename Exec>
void arg_min_op(Exec& ex, DeviceOpArgs& a) {
  arg_extreme_op(ex, a, false);
}

/// Hardmax of a column: 1 at the first maximum (a NaN counts as one), 0 elsewhere.
struct HardmaxColumn {
  const float* x;
  float* y;
  AxisView v;
  PIPETRAIN_HD void operator()(int64_t c) const {
    const int64_t o = c / v.inner, k = c - o * v.inner;
    const int64_t at = o * v.n * v.inner + k;
    int64_t best = 0;
    float b = x[at];
    for (int64_t j = 1; j < v.n && b == b; ++j) {
      const float e = x[at + j * v.inner];
      if (e != e || e > b) {
        b = e;
        best = j;
      }
    }
    for (int64_t j = 0; j < v.n; ++j) y[at + j * v.inner] = j == best ? 1.0f : 0.0f;
  }
};

template <typename Exec>
void hardmax_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  if (y.numel() == 0) return;
  const AxisView v = axis_view(x.shape, a.n().attr_int("axis", -1));
  ex.for_each(v.outer * v.inner, HardmaxColumn{x.data<float>(), y.data<float>(), v});
}

/// TopK of a column: output j is the element that comes j-th in the order
/// (larger first, or smaller first; a NaN first among the largest and last
/// among the smallest; equal values by lower index). Each output is the
/// first element after output j-1 in that order, an O(n k) walk that needs
/// no scratch, so one column is one thread anywhere.
template <typename T>
struct TopKColumn {
  const T* x;
  T* values;
  int64_t* indices;
  AxisView v;
  int64_t k;
  bool largest;
  /// Whether (a, i) comes before (b, j).
  PIPETRAIN_HD bool before(T a, int64_t i, T b, int64_t j) const {
    const bool a_nan = a != a, b_nan = b != b;
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return i < j;
      return largest ? a_nan : b_nan;
    }
    if (a != b) return largest ? a > b : a < b;
    return i < j;
  }
  PIPETRAIN_HD void operator()(int64_t c) const {
    const int64_t o = c / v.inner, in = c - o * v.inner;
    const T* col = x + o * v.n * v.inner + in;
    const int64_t out0 = o * k * v.inner + in;
    T prev{};
    int64_t prev_i = -1;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < v.n; ++e) {
        const T val = col[e * v.inner];
        if (prev_i >= 0 && !before(prev, prev_i, val, e)) continue;  // taken already
        if (best < 0 || before(val, e, col[best * v.inner], best)) best = e;
      }
      prev = col[best * v.inner];
      prev_i = best;
      values[out0 + j * v.inner] = prev;
      indices[out0 + j * v.inner] = best;
    }
  }
};

template <typename Exec>
void top_k_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &values = a.out[0], &indices = a.out[1];
  if (values.numel() == 0) return;
  const AxisView v = axis_view(x.shape, a.n().attr_int("axis", -1));
  const int64_t k = a.host->in(1).to_i64().at(0);
  const bool largest = a.n().attr_int("largest", 1) != 0;
  with_storage(x.dtype, [&](auto tag) {
    using T = std::decay_t<decltype(tag)>;
    if constexpr (!std::is_same_v<T, uint8_t>)
      ex.for_each(v.outer * v.inner, TopKColumn<T>{x.data<T>(), values.data<T>(),
                                                   indices.data<int64_t>(), v, k, largest});
  });
}

/// CumSum of a column, accumulated in acc_t (double for floats) in axis
/// order (or reversed), each output the sum before (exclusive) or through it.
template <typename T>
struct CumSumColumn {
  const T* x;
  T* y;
  AxisView v;
  bool exclusive, reverse;
  PIPETRAIN_HD void operator()(int64_t c) const {
    const int64_t o = c / v.inner, k = c - o * v.inner;
    const int64_t at = o * v.n * v.inner + k;
    acc_t<T> acc{0};
    for (int64_t s = 0; s < v.n; ++s) {
      const int64_t j = reverse ? v.n - 1 - s : s;
      const int64_t i = at + j * v.inner;
      const acc_t<T> e = static_cast<acc_t<T>>(x[i]);
      if (!exclusive) acc = wrap_add(acc, e);
      y[i] = static_cast<T>(acc);
      if (exclusive) acc = wrap_add(acc, e);
    }
  }
};

template <typename Exec>
void cum_sum_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  if (y.numel() == 0) return;
  const AxisView v = axis_view(x.shape, a.host->in(1).to_i64().at(0));
  const bool exclusive = a.n().attr_int("exclusive", 0) != 0;
  const bool reverse = a.n().attr_int("reverse", 0) != 0;
  with_storage(x.dtype, [&](auto tag) {
    using T = std::decay_t<decltype(tag)>;
    if constexpr (!std::is_same_v<T, uint8_t>)
      ex.for_each(v.outer * v.inner,
                  CumSumColumn<T>{x.data<T>(), y.data<T>(), v, exclusive, reverse});
  });
}

}  // namespace pipetrain::exec::device
