// CPU kernels of the ops that select or assemble parts of tensors along axes:
// Concat, Split, Slice, Gather, Pad. Dtype-agnostic: elements move as opaque
// words of the element size, contiguous runs by memcpy.
#include <algorithm>
#include <cstring>
#include <string>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/byte_copy.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "ir/error.h"
#include "ir/ops/data_movement.h"

namespace pipetrain::exec::cpu {

namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

/// Product of dims [from, to).
int64_t span(const Shape& s, int64_t from, int64_t to) {
  int64_t n = 1;
  for (int64_t a = from; a < to; ++a) n *= s[static_cast<size_t>(a)];
  return n;
}

// Concat / Split view every tensor as (outer, dim_axis * inner) rows of bytes;
// part i occupies columns [offset_i, offset_i + dim_i * inner) of the whole.

void concat_kernel(KernelContext& ctx) {
  Tensor& y = ctx.out(0);
  const Shape& out = y.shape();
  const int64_t rank = static_cast<int64_t>(out.size());
  const int64_t axis = ir::normalize_axis(ctx.n().attr_int("axis", 0), rank);
  const int64_t es = static_cast<int64_t>(ir::dtype_size(y.dtype()));
  const int64_t outer = span(out, 0, axis), inner = span(out, axis + 1, rank) * es;
  const int64_t row = out[static_cast<size_t>(axis)] * inner;  // bytes per outer index of y
  std::byte* dst = bytes(y);
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor& x = ctx.in(i);
    const int64_t chunk = x.shape()[static_cast<size_t>(axis)] * inner;
    const std::byte* src = bytes(x);
    // Split over the threads by rows (work in floats' worth of bytes).
    if (chunk > 0)
      parallel_for(
          outer, outer * chunk / 4,
          [&](int64_t begin, int64_t end) {
            for (int64_t o = begin; o < end; ++o)
              std::memcpy(dst + o * row + offset, src + o * chunk, static_cast<size_t>(chunk));
          },
          1);
    offset += chunk;
  }
  assert(offset == row);
}

void split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Shape& in = x.shape();
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t axis = ir::normalize_axis(ctx.n().attr_int("axis", 0), rank);
  const int64_t es = static_cast<int64_t>(ir::dtype_size(x.dtype()));
  const int64_t outer = span(in, 0, axis), inner = span(in, axis + 1, rank) * es;
  const int64_t row = in[static_cast<size_t>(axis)] * inner;  // bytes per outer index of x
  const std::byte* src = bytes(x);
  int64_t offset = 0;
  for (size_t k = 0; k < ctx.outputs.size(); ++k) {
    Tensor& y = ctx.out(k);  // the shape rule sized every output
    const int64_t chunk = y.shape()[static_cast<size_t>(axis)] * inner;
    std::byte* dst = bytes(y);
    if (chunk > 0)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + o * chunk, src + o * row + offset, static_cast<size_t>(chunk));
    offset += chunk;
  }
  assert(offset == row);
}

std::vector<int64_t> optional_ints(const KernelContext& ctx, size_t i) {
  return ctx.has_in(i) ? ctx.in(i).to_i64() : std::vector<int64_t>{};
}

void slice_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  const ir::SliceSpec spec = ir::resolve_slice(x.shape(), ctx.in(1).to_i64(), ctx.in(2).to_i64(),
                                               optional_ints(ctx, 3), optional_ints(ctx, 4));
  assert(spec.out == y.shape());
  if (y.numel() == 0) return;
  const size_t r = spec.out.size();
  if (r == 0) {
    std::memcpy(y.raw(), x.raw(), x.nbytes());
    return;
  }
  // y[k] = x[start + k * step] per axis: base offset plus per-axis strides.
  const std::vector<int64_t> in_st = ir::strides_of(x.shape()), dst_st = ir::strides_of(spec.out);
  std::vector<int64_t> src_st(r);
  int64_t base = 0;
  for (size_t a = 0; a < r; ++a) {
    base += spec.start[a] * in_st[a];
    src_st[a] = spec.step[a] * in_st[a];
  }
  Shape outer = spec.out;
  outer[r - 1] = 1;
  const int64_t n = spec.out[r - 1], inner_step = src_st[r - 1];
  with_word(ir::dtype_size(x.dtype()), [&](auto word) {
    using W = decltype(word);
    const W* s0 = x.data<W>() + base;
    W* d0 = y.data<W>();
    walk2_parallel(outer, src_st, dst_st, y.numel(),
                   [&](int64_t s, int64_t d) { strided_copy(d0 + d, 1, s0 + s, inner_step, n); });
  });
}

template <typename I>
std::vector<int64_t> checked_indices(const KernelContext& ctx, const Tensor& idx, int64_t dim) {
  std::vector<int64_t> v(static_cast<size_t>(idx.numel()));
  const I* p = idx.data<I>();
  for (size_t k = 0; k < v.size(); ++k) {
    int64_t i = static_cast<int64_t>(p[k]);
    if (i < -dim || i >= dim)
      // Index values are data, not shapes: no shape rule can check them.
      throw RuntimeFault(ctx.n().describe() + ": index " + std::to_string(i) +
                         " is out of range for an axis of size " + std::to_string(dim));
    v[k] = i < 0 ? i + dim : i;
  }
  return v;
}

void gather_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& idx_t = ctx.in(1);
  Tensor& y = ctx.out(0);
  const Shape& in = x.shape();
  const int64_t rank = static_cast<int64_t>(in.size());
  const int64_t axis = ir::normalize_axis(ctx.n().attr_int("axis", 0), rank);
  const int64_t dim = in[static_cast<size_t>(axis)];
  const std::vector<int64_t> idx = idx_t.dtype() == DType::kI64
                                       ? checked_indices<int64_t>(ctx, idx_t, dim)
                                       : checked_indices<int32_t>(ctx, idx_t, dim);
  // x: (outer, dim, inner), y: (outer, K, inner) with K = numel(indices).
  const int64_t es = static_cast<int64_t>(ir::dtype_size(x.dtype()));
  const int64_t outer = span(in, 0, axis), inner = span(in, axis + 1, rank) * es;
  const int64_t k_n = static_cast<int64_t>(idx.size());
  if (inner == 0) return;
  const std::byte* src = bytes(x);
  std::byte* dst = bytes(y);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < k_n; ++k)
      std::memcpy(dst + (o * k_n + k) * inner,
                  src + (o * dim + idx[static_cast<size_t>(k)]) * inner,
                  static_cast<size_t>(inner));
}

void pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  const ir::PadMode mode = ir::pad_mode_from_string(ctx.n().attr_string("mode", "constant"));
  const ir::PadSpec spec =
      ir::resolve_pads(x.shape(), ctx.in(1).to_i64(), optional_ints(ctx, 3), mode);
  assert(spec.out == y.shape());
  if (y.numel() == 0) return;
  const Shape& in = x.shape();
  const Shape& out = spec.out;
  const size_t r = out.size();
  // src[a][i]: input index along axis a feeding output index i, -1 for the constant.
  std::vector<std::vector<int64_t>> src(r);
  for (size_t a = 0; a < r; ++a)
    for (int64_t i = 0; i < out[a]; ++i)
      src[a].push_back(ir::pad_source_index(i - spec.begin[a], in[a], mode));
  const std::vector<int64_t> in_st = ir::strides_of(in);

  with_word(ir::dtype_size(x.dtype()), [&](auto word) {
    using W = decltype(word);
    const W fill = ctx.has_in(2) ? *ctx.in(2).data<W>() : W{0};
    const W* xs = x.data<W>();
    W* ys = y.data<W>();
    if (r == 0) {
      ys[0] = xs[0];
      return;
    }
    // Along the last axis, outputs [lo, hi) map 1:1 onto the input: one memcpy.
    const int64_t n = out[r - 1], b = spec.begin[r - 1];
    const int64_t lo = std::clamp<int64_t>(b, 0, n);
    const int64_t hi = std::max(lo, std::clamp<int64_t>(b + in[r - 1], 0, n));
    const std::vector<int64_t>& last = src[r - 1];
    std::vector<int64_t> idx(r - 1, 0);  // index of the current output row
    const int64_t rows = ir::numel(Shape(out.begin(), out.end() - 1));
    for (int64_t row = 0; row < rows; ++row) {
      W* d = ys + row * n;
      int64_t off = 0;
      bool constant_row = false;
      for (size_t a = 0; a + 1 < r; ++a) {
        const int64_t s = src[a][static_cast<size_t>(idx[a])];
        constant_row = constant_row || s < 0;
        off += s * in_st[a];
      }
      if (constant_row) {
        std::fill(d, d + n, fill);
      } else {
        const W* s = xs + off;
        for (int64_t j = 0; j < lo; ++j)
          d[j] = last[static_cast<size_t>(j)] < 0 ? fill : s[last[static_cast<size_t>(j)]];
        if (hi > lo) std::memcpy(d + lo, s + (lo - b), static_cast<size_t>(hi - lo) * sizeof(W));
        for (int64_t j = hi; j < n; ++j)
          d[j] = last[static_cast<size_t>(j)] < 0 ? fill : s[last[static_cast<size_t>(j)]];
      }
      for (size_t a = r - 1; a-- > 0;) {  // next row index, last axis fastest
        if (++idx[a] < out[a]) break;
        idx[a] = 0;
      }
    }
  });
}

}  // namespace

CpuKernel kernel_Concat() {
  return {concat_kernel, any_dtype(), 0};
}
CpuKernel kernel_Split() {
  return {split_kernel, any_dtype(), 0};
}
CpuKernel kernel_Slice() {
  return {slice_kernel, any_dtype(), 0};
}
CpuKernel kernel_Gather() {
  return {gather_kernel, any_dtype(), 0};
}
CpuKernel kernel_Pad() {
  return {pad_kernel, any_dtype(), 0};
}

}  // namespace pipetrain::exec::cpu
