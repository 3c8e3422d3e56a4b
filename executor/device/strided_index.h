// Maps an output element's linear index to input offsets for numpy
// broadcasting and permuted views, without loops over dims on the host:
// every element decomposes its own index (what a CUDA thread does).
#pragma once

#include <cassert>
#include <cstdint>
#include <vector>

#include "executor/device/hd.h"
#include "ir/error.h"
#include "ir/shape.h"

namespace pipetrain::exec::device {

inline constexpr int kMaxDims = 8;

/// Output dims (row-major) and, per operand, the element stride of each dim
/// (0 where the operand is broadcast).
template <int N>
struct StridedIndex {
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  /// Operand k's offset of output element i.
  PIPETRAIN_HD int64_t offset(int64_t i, int k) const {
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = i / dims[d];
      off += (i - q * dims[d]) * strides[k][d];
      i = q;
    }
    return off;
  }
};

/// Row-major element strides of `shape`.
inline std::vector<int64_t> contiguous_strides(const ir::Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

/// Each operand right-aligned against `out` with numpy broadcasting.
template <int N>
StridedIndex<N> broadcast_index(const ir::Shape& out, const std::vector<const ir::Shape*>& in) {
  assert(in.size() == static_cast<size_t>(N));
  if (out.size() > static_cast<size_t>(kMaxDims))
    throw UnsupportedOp("tensors of rank " + std::to_string(out.size()) +
                        " (the device kernels index at most 8 dims)");
  StridedIndex<N> idx;
  idx.rank = static_cast<int>(out.size());
  for (size_t d = 0; d < out.size(); ++d) idx.dims[d] = out[d];
  for (int k = 0; k < N; ++k) {
    const ir::Shape& s = *in[static_cast<size_t>(k)];
    const std::vector<int64_t> st = contiguous_strides(s);
    for (size_t i = 0; i < s.size(); ++i) {
      const size_t o = i + out.size() - s.size();
      idx.strides[k][o] = s[i] == 1 ? 0 : st[i];
    }
  }
  return idx;
}

}  // namespace pipetrain::exec::device
