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
