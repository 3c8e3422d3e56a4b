// CPU kernels of the ops that relabel, permute or broadcast data or produce
// shape-like constants. Data moves as opaque words of the element size, so
// every kernel but Range serves all dtypes.
#include <algorithm>
#include <cstring>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/byte_copy.h"
#include "ir/ops/data_movement.h"

namespace pipetrain::exec::cpu {

namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

/// Flatten, Reshape, Squeeze, Unsqueeze, Identity: same bytes, new shape.
/// Outputs are tensor handles, so the output becomes a view of the input's
/// buffer instead of a copy. Safe because no kernel writes into its inputs:
/// a shared buffer is only ever read after it was produced.
void view_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  assert(x.dtype() == y.dtype() && x.nbytes() == y.nbytes());
  y = x.reshaped(y.shape());
}

/// dst[i * dst_row_stride + j] = src[i + j * src_col_stride] for i < rows,
/// j < cols. Two-level blocking: 64 x 64 tiles keep both sides in cache, and
/// fixed 8 x 8 blocks inside them (constant trip counts the compiler unrolls)
/// touch only 8 lines per side, which also avoids cache-set conflicts when
/// the strides are powers of two.
template <typename W>
void tile_transpose(W* dst, const W* src, int64_t rows, int64_t cols, int64_t dst_row_stride,
                    int64_t src_col_stride) {
  constexpr int64_t kTile = 64, kMicro = 8;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(i0 + kTile, rows);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t j1 = std::min(j0 + kTile, cols);
      for (int64_t i = i0; i < i1; i += kMicro) {
        for (int64_t j = j0; j < j1; j += kMicro) {
          W* d = dst + i * dst_row_stride + j;
          const W* s = src + i + j * src_col_stride;
          if (i + kMicro <= i1 && j + kMicro <= j1) {
            for (int64_t a = 0; a < kMicro; ++a)
              for (int64_t b = 0; b < kMicro; ++b)
                d[a * dst_row_stride + b] = s[a + b * src_col_stride];
          } else {
            const int64_t na = std::min(kMicro, i1 - i), nb = std::min(kMicro, j1 - j);
            for (int64_t a = 0; a < na; ++a)
              for (int64_t b = 0; b < nb; ++b)
                d[a * dst_row_stride + b] = s[a + b * src_col_stride];
          }
        }
      }
    }
  }
}

void transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  const Shape& in = x.shape();
  const size_t rank = in.size();
  const size_t es = ir::dtype_size(x.dtype());
  std::vector<int64_t> perm = ctx.n().attr_ints("perm");
  if (!ctx.n().has_attr("perm"))
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (x.numel() == 0) return;

  // Coalesce: drop size-1 axes, then merge output-adjacent axes that are also
  // adjacent in the input; what remains is a permutation of r <= rank blocks.
  std::vector<int64_t> kept_pos(rank, -1);  // input axis -> index among kept axes
  int64_t kept = 0;
  for (size_t a = 0; a < rank; ++a)
    if (in[a] != 1) kept_pos[a] = kept++;
  struct Group {
    int64_t first_pos;  // kept position of its first input axis
    int64_t last_pos;
    int64_t size;
  };
  std::vector<Group> groups;  // in output order
  for (int64_t p : perm) {
    const size_t a = static_cast<size_t>(p);
    if (in[a] == 1) continue;
    if (!groups.empty() && kept_pos[a] == groups.back().last_pos + 1) {
      groups.back().last_pos = kept_pos[a];
      groups.back().size *= in[a];
    } else {
      groups.push_back({kept_pos[a], kept_pos[a], in[a]});
    }
  }
  const size_t r = groups.size();
  if (r <= 1) {
    std::memcpy(y.raw(), x.raw(), x.nbytes());
    return;
  }
  // Coalesced input: groups sorted by input position; cperm[j] = input block of output block j.
  std::vector<size_t> by_input(r);
  for (size_t j = 0; j < r; ++j) by_input[j] = j;
  std::sort(by_input.begin(), by_input.end(),
            [&](size_t a, size_t b) { return groups[a].first_pos < groups[b].first_pos; });
  Shape in_c(r), out_c(r);
  std::vector<size_t> cperm(r);
  for (size_t k = 0; k < r; ++k) {
    in_c[k] = groups[by_input[k]].size;
    cperm[by_input[k]] = k;
  }
  for (size_t j = 0; j < r; ++j) out_c[j] = in_c[cperm[j]];
  const std::vector<int64_t> in_st = ir::strides_of(in_c), out_st = ir::strides_of(out_c);
  std::vector<int64_t> src_st(r);  // input stride of each output block, in elements
  for (size_t j = 0; j < r; ++j) src_st[j] = in_st[cperm[j]];

  const std::byte* src = bytes(x);
  std::byte* dst = bytes(y);
  Shape outer = out_c;
  outer[r - 1] = 1;
  if (cperm[r - 1] == r - 1) {
    // Innermost block is contiguous in both: one memcpy per run.
    const size_t run = static_cast<size_t>(out_c[r - 1]) * es;
    walk2_parallel(outer, src_st, out_st, x.numel(), [&](int64_t s, int64_t d) {
      std::memcpy(dst + d * static_cast<int64_t>(es), src + s * static_cast<int64_t>(es), run);
    });
    return;
  }
  // Output block q reads the contiguous input block; tile it against the
  // innermost output block (contiguous writes).
  size_t q = 0;
  while (cperm[q] != r - 1) ++q;
  outer[q] = 1;
  with_word(es, [&](auto word) {
    using W = decltype(word);
    const W* s0 = reinterpret_cast<const W*>(src);
    W* d0 = reinterpret_cast<W*>(dst);
    walk2_parallel(outer, src_st, out_st, x.numel() * 2, [&](int64_t s, int64_t d) {
      tile_transpose(d0 + d, s0 + s, out_c[q], out_c[r - 1], out_st[q], src_st[r - 1]);
    });
  });
}

void expand_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  const Shape& out = y.shape();
  const size_t r = out.size();
  const int64_t es = static_cast<int64_t>(ir::dtype_size(x.dtype()));
  if (y.numel() == 0) return;
  Shape in(r - x.shape().size(), 1);  // right-aligned input shape
  in.insert(in.end(), x.shape().begin(), x.shape().end());
  std::vector<int64_t> src_st = ir::strides_of(in), dst_st = ir::strides_of(out);
  for (size_t a = 0; a < r; ++a)
    if (in[a] != out[a]) src_st[a] = 0;  // broadcast axis (in[a] == 1)
  // Axes [k, r) are not broadcast: one contiguous chunk per outer index.
  size_t k = r;
  while (k > 0 && in[k - 1] == out[k - 1]) --k;
  const std::byte* src = bytes(x);
  std::byte* dst = bytes(y);
  if (k < r || r == 0) {
    const int64_t chunk = ir::numel(Shape(out.begin() + static_cast<int64_t>(k), out.end())) * es;
    Shape outer(out.begin(), out.begin() + static_cast<int64_t>(k));
    src_st.resize(k);
    dst_st.resize(k);
    walk2_parallel(outer, src_st, dst_st, y.numel(), [&](int64_t s, int64_t d) {
      std::memcpy(dst + d * es, src + s * es, static_cast<size_t>(chunk));
    });
    return;
  }
  // The innermost axis is broadcast: fill each output row with one element.
  const int64_t n = out[r - 1];
  Shape outer = out;
  outer[r - 1] = 1;
  with_word(static_cast<size_t>(es), [&](auto word) {
    using W = decltype(word);
    const W* s0 = reinterpret_cast<const W*>(src);
    W* d0 = reinterpret_cast<W*>(dst);
    walk2_parallel(outer, src_st, dst_st, y.numel(),
                   [&](int64_t s, int64_t d) { std::fill(d0 + d, d0 + d + n, s0[s]); });
  });
}

void shape_kernel(KernelContext& ctx) {
  const Shape& in = ctx.in(0).shape();
  Tensor& y = ctx.out(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  auto [first, last] =
      ir::shape_op_range(rank, ctx.n().attr_int("start", 0), ctx.n().attr_int("end", rank));
  assert(y.numel() == last - first);
  int64_t* out = y.data<int64_t>();  // (last - first)
  for (int64_t a = first; a < last; ++a) out[a - first] = in[static_cast<size_t>(a)];
}

void size_kernel(KernelContext& ctx) {
  ctx.out(0).data<int64_t>()[0] = ctx.in(0).numel();
}

void constant_kernel(KernelContext& ctx) {
  const Tensor v = ir::constant_node_value(ctx.n());
  Tensor& y = ctx.out(0);
  assert(v.nbytes() == y.nbytes());
  if (v.nbytes()) std::memcpy(y.raw(), v.raw(), v.nbytes());
}

void constant_of_shape_kernel(KernelContext& ctx) {
  const Tensor v = ir::constant_of_shape_value(ctx.n());
  Tensor& y = ctx.out(0);
  assert(v.dtype() == y.dtype());
  with_word(ir::dtype_size(y.dtype()), [&](auto word) {
    using W = decltype(word);
    std::fill(y.data<W>(), y.data<W>() + y.numel(), *v.data<W>());
  });
}

/// out[i] = start + i * delta. Integers in their own dtype; f32 through
/// double like ONNX's reference (numpy.arange, then a cast), so long ranges do
/// not accumulate float rounding.
template <typename T, typename Acc>
void range_fill(KernelContext& ctx) {
  const Acc start = static_cast<Acc>(*ctx.in(0).data<T>());
  const Acc delta = static_cast<Acc>(*ctx.in(2).data<T>());
  Tensor& y = ctx.out(0);
  T* out = y.data<T>();  // (n)
  for (int64_t i = 0; i < y.numel(); ++i)
    out[i] = static_cast<T>(start + static_cast<Acc>(i) * delta);
}

void range_kernel(KernelContext& ctx) {
  switch (ctx.in(0).dtype()) {
    case DType::kF32: range_fill<float, double>(ctx); break;
    case DType::kI64: range_fill<int64_t, int64_t>(ctx); break;
    case DType::kI32: range_fill<int32_t, int64_t>(ctx); break;
    default: assert(false && "Range dtype not listed");
  }
}

}  // namespace

CpuKernel kernel_Flatten() {
  return {view_kernel, any_dtype(), 0};
}
CpuKernel kernel_Reshape() {
  return {view_kernel, any_dtype(), 0};
}
CpuKernel kernel_Squeeze() {
  return {view_kernel, any_dtype(), 0};
}
CpuKernel kernel_Unsqueeze() {
  return {view_kernel, any_dtype(), 0};
}
CpuKernel kernel_Identity() {
  return {view_kernel, any_dtype(), 0};
}
CpuKernel kernel_Transpose() {
  return {transpose_kernel, any_dtype(), 0};
}
CpuKernel kernel_Expand() {
  return {expand_kernel, any_dtype(), 0};
}
CpuKernel kernel_Shape() {
  return {shape_kernel, any_dtype(), 0};
}
CpuKernel kernel_Size() {
  return {size_kernel, any_dtype(), 0};
}
CpuKernel kernel_Constant() {
  return {constant_kernel, any_dtype(), -1};
}
CpuKernel kernel_ConstantOfShape() {
  return {constant_of_shape_kernel, any_dtype(), -1};
}
CpuKernel kernel_Range() {
  return {range_kernel, {DType::kF32, DType::kI64, DType::kI32}, 0};
}

}  // namespace pipetrain::exec::cpu
