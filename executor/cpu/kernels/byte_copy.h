// Dtype-agnostic copy helpers for the data-movement kernels: they move
// elements as opaque words of the element's size (1, 2, 4 or 8 bytes).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "executor/cpu/kernels/cpu_threads.h"
#include "ir/dtype.h"
#include "ir/shape.h"
#include "ir/tensor.h"

namespace pipetrain::exec::cpu {

/// Every dtype: data movement never looks inside an element.
inline std::vector<ir::DType> any_dtype() {
  return {ir::DType::kF32, ir::DType::kF16, ir::DType::kBF16,
          ir::DType::kI64, ir::DType::kI32, ir::DType::kBool};
}

inline const std::byte* bytes(const ir::Tensor& t) {
  return static_cast<const std::byte*>(t.raw());
}
inline std::byte* bytes(ir::Tensor& t) {
  return static_cast<std::byte*>(t.raw());
}

/// Calls f(Word{}) with the unsigned integer type whose size is `esize`, so a
/// templated body moves elements of any dtype by value.
template <typename F>
void with_word(size_t esize, F&& f) {
  switch (esize) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: assert(false && "unsupported element size");
  }
}

/// Visits the indices [begin, end) of `dims` (row-major numbering) in order
/// with the matching linear offsets of two operands whose per-axis strides
/// are sa and sb: f(sum_a idx[a] * sa[a], sum_a idx[a] * sb[a]).
template <typename F>
void walk2_range(const ir::Shape& dims, const std::vector<int64_t>& sa,
                 const std::vector<int64_t>& sb, int64_t begin, int64_t end, F&& f) {
  assert(sa.size() == dims.size() && sb.size() == dims.size());
  if (begin >= end) return;
  const size_t rank = dims.size();
  std::vector<int64_t> idx(rank, 0);
  int64_t oa = 0, ob = 0;
  for (size_t d = rank, r = static_cast<size_t>(begin); d-- > 0;) {
    idx[d] = static_cast<int64_t>(r) % dims[d];
    r /= static_cast<size_t>(dims[d]);
    oa += idx[d] * sa[d];
    ob += idx[d] * sb[d];
  }
  for (int64_t k = begin; k < end; ++k) {
    f(oa, ob);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < dims[d]) {
        oa += sa[d];
        ob += sb[d];
        break;
      }
      idx[d] = 0;
      oa -= sa[d] * (dims[d] - 1);
      ob -= sb[d] * (dims[d] - 1);
    }
  }
}

/// Visits every index of `dims` in row-major order (walk2_range over all of
/// them). A rank-0 `dims` visits once.
template <typename F>
void walk2(const ir::Shape& dims, const std::vector<int64_t>& sa, const std::vector<int64_t>& sb,
           F&& f) {
  walk2_range(dims, sa, sb, 0, ir::numel(dims), f);
}

/// walk2 with the visits split over threads (parallel_for); for visits that
/// write disjoint elements. `work`: the elements all visits move.
template <typename F>
void walk2_parallel(const ir::Shape& dims, const std::vector<int64_t>& sa,
                    const std::vector<int64_t>& sb, int64_t work, F&& f) {
  parallel_for(
      ir::numel(dims), work,
      [&](int64_t begin, int64_t end) { walk2_range(dims, sa, sb, begin, end, f); }, 1);
}

/// dst[i * dst_stride] = src[i * src_stride] for i < n (strides in elements).
template <typename W>
inline void strided_copy(W* dst, int64_t dst_stride, const W* src, int64_t src_stride, int64_t n) {
  if (dst_stride == 1 && src_stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(W));
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i * dst_stride] = src[i * src_stride];
}

}  // namespace pipetrain::exec::cpu
