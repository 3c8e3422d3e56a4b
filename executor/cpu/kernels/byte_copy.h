// Dtype-agnostic copy helpers for the data-movement kernels: they move
// elements as opaque words of the element's size (1, 2, 4 or 8 bytes).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

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

/// Visits every index of `dims` in row-major order with the matching linear
/// offsets of two operands whose per-axis strides are sa and sb:
/// f(sum_a idx[a] * sa[a], sum_a idx[a] * sb[a]). A rank-0 `dims` visits once.
template <typename F>
void walk2(const ir::Shape& dims, const std::vector<int64_t>& sa, const std::vector<int64_t>& sb,
           F&& f) {
  assert(sa.size() == dims.size() && sb.size() == dims.size());
  for (int64_t d : dims)
    if (d == 0) return;
  const size_t rank = dims.size();
  std::vector<int64_t> idx(rank, 0);
  int64_t oa = 0, ob = 0;
  for (;;) {
    f(oa, ob);
    size_t d = rank;
    for (;;) {
      if (d == 0) return;
      --d;
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
