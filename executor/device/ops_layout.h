// Shared implementations of Trilu and Tile: one functor call per output
// element, which finds its source from its own index (no loops over dims on
// the host). Any dtype moves as words of its size.
#pragma once

#include <string>
#include <vector>

#include "executor/device/ops_elementwise.h"

namespace pipetrain::exec::device {

/// Trilu: y = x where column - row >= k (upper) or <= k (lower), else 0, in
/// every (rows, cols) matrix of the trailing two dims.
template <typename W>
struct TriluMask {
  const W* x;
  W* y;
  int64_t rows, cols, k;
  bool upper;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t c = i % cols, r = (i / cols) % rows;
    const bool keep = upper ? c - r >= k : c - r <= k;
    y[i] = keep ? x[i] : W{0};
  }
};

template <typename Exec>
void trilu_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  const size_t rank = x.shape.size();
  const int64_t k = a.has_in(1) ? a.host->in(1).to_i64().at(0) : 0;
  with_word(x.dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    ex.for_each(y.numel(), TriluMask<W>{x.data<W>(), y.data<W>(), x.shape[rank - 2],
                                        x.shape[rank - 1], k, a.n().attr_int("upper", 1) != 0});
  });
}

/// EyeLike: ones on the diagonal shifted by k of a (rows, cols) matrix.
template <typename T>
struct EyeFill {
  T* y;
  int64_t cols, k;
  PIPETRAIN_HD void operator()(int64_t i) const {
    y[i] = (i % cols) - (i / cols) == k ? T(1) : T(0);
  }
};

template <typename Exec>
void eye_like_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor& y = a.out[0];
  if (y.numel() == 0) return;
  with_storage(y.dtype, [&](auto tag) {
    using T = std::decay_t<decltype(tag)>;
    ex.for_each(y.numel(), EyeFill<T>{y.data<T>(), y.shape[1], a.n().attr_int("k", 0)});
  });
}

/// OneHot: output (outer, depth, inner) is values[1] where the index
/// (outer, inner) names that class (negative ones count from depth), else values[0].
template <typename I, typename T>
struct OneHotFill {
  const I* idx;
  const T* values;  // (off, on)
  T* y;
  int64_t depth, inner;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t r = i % inner, od = i / inner, d = od % depth, o = od / depth;
    int64_t k = static_cast<int64_t>(idx[o * inner + r]);
    if (k < 0) k += depth;
    y[i] = k == d ? values[1] : values[0];
  }
};

template <typename Exec>
void one_hot_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &idx = a.in[0], &values = a.in[2], &y = a.out[0];
  if (y.numel() == 0) return;
  const int64_t rank = static_cast<int64_t>(y.shape.size());
  const int64_t axis = ir::normalize_axis(a.n().attr_int("axis", -1), rank);
  const int64_t depth = y.shape[static_cast<size_t>(axis)];
  const int64_t inner = ir::numel(ir::Shape(y.shape.begin() + axis + 1, y.shape.end()));
  with_storage(idx.dtype, [&](auto itag) {
    using I = std::decay_t<decltype(itag)>;
    with_storage(values.dtype, [&](auto vtag) {
      using T = std::decay_t<decltype(vtag)>;
      if constexpr (!std::is_same_v<I, uint8_t>)
        ex.for_each(y.numel(),
                    OneHotFill<I, T>{idx.data<I>(), values.data<T>(), y.data<T>(), depth, inner});
    });
  });
}

/// Tile: output coordinate c reads input coordinate c mod the input's dim.
template <typename W>
struct TileGather {
  const W* x;
  W* y;
  int rank = 0;
  int64_t out_dims[kMaxDims], in_dims[kMaxDims], in_strides[kMaxDims];
  PIPETRAIN_HD void operator()(int64_t i) const {
    int64_t off = 0, rest = i;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = rest / out_dims[d];
      off += ((rest - q * out_dims[d]) % in_dims[d]) * in_strides[d];
      rest = q;
    }
    y[i] = x[off];
  }
};

template <typename Exec>
void tile_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  if (y.numel() == 0) return;
  if (x.shape.size() > static_cast<size_t>(kMaxDims))
    throw UnsupportedOp("Tile of rank " + std::to_string(x.shape.size()) +
                        " (the device kernels index at most 8 dims)");
  const std::vector<int64_t> st = contiguous_strides(x.shape);
  with_word(x.dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    TileGather<W> f{};
    f.x = x.data<W>();
    f.y = y.data<W>();
    f.rank = static_cast<int>(x.shape.size());
    for (size_t d = 0; d < x.shape.size(); ++d) {
      f.out_dims[d] = y.shape[d];
      f.in_dims[d] = x.shape[d];
      f.in_strides[d] = st[d];
    }
    ex.for_each(y.numel(), f);
  });
}

}  // namespace pipetrain::exec::device
