// CPU kernels of GatherGrad and SliceGrad (f32): the adjoints of Gather and
// Slice in index_ops.cc. dX arrives zero-filled.
#include <cstring>
#include <string>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/byte_copy.h"
#include "ir/error.h"

namespace pipetrain::exec::cpu {

namespace {

using ir::Shape;
using ir::Tensor;

/// Indices of any integer dtype as i64, negative ones wrapped (i + dim);
/// out of [-dim, dim) is a RuntimeFault (index values are data, which no
/// shape rule sees).
std::vector<int64_t> wrapped_indices(const KernelContext& ctx, const Tensor& idx, int64_t dim) {
  std::vector<int64_t> v = idx.to_i64();
  for (int64_t& i : v) {
    if (i < -dim || i >= dim)
      throw RuntimeFault(ctx.n().describe() + ": index " + std::to_string(i) +
                         " is out of range for an axis of size " + std::to_string(dim));
    if (i < 0) i += dim;
  }
  return v;
}

/// Gather: y[o, k, i] = x[o, idx[k], i] over x (outer, dim, inner), y (outer, K, inner).
/// Its adjoint scatter-adds: dx[o, idx[k], i] += dy[o, k, i], k ascending, so
/// repeated indices sum in a fixed order.
void gather_grad(KernelContext& ctx) {
  const Tensor& dy = ctx.in(0);  // (outer, K, inner) = data_shape[:axis] + indices + [axis+1:]
  Tensor& dx = ctx.out(0);       // data_shape, zero-filled
  const Shape& data = dx.shape();
  const int64_t rank = static_cast<int64_t>(data.size());
  const int64_t axis = ir::normalize_axis(ctx.n().attr_int("axis", 0), rank);
  const int64_t dim = data[static_cast<size_t>(axis)];
  const std::vector<int64_t> idx = wrapped_indices(ctx, ctx.in(1), dim);
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= data[static_cast<size_t>(a)];
  for (int64_t a = axis + 1; a < rank; ++a) inner *= data[static_cast<size_t>(a)];
  const int64_t k_n = static_cast<int64_t>(idx.size());
  if (dy.numel() != outer * k_n * inner)
    throw ModelError(ctx.n().describe() + ": gradient " + ir::shape_str(dy.shape()) +
                     " does not match data " + ir::shape_str(data) + " gathered by " +
                     ir::shape_str(ctx.in(1).shape()) + " along axis " + std::to_string(axis));
  const float* g = dy.data<float>();
  float* d = dx.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < k_n; ++k) {
      const float* src = g + (o * k_n + k) * inner;                      // (inner)
      float* dst = d + (o * dim + idx[static_cast<size_t>(k)]) * inner;  // (inner)
      for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
    }
}

/// Slice: y[k] = x[start + k * step] per axis, so dx[start + k * step] = dy[k]
/// and 0 elsewhere (a slice never reads an element twice).
void slice_grad(KernelContext& ctx) {
  const Tensor& dy = ctx.in(0);  // (M...) the slice
  Tensor& dx = ctx.out(0);       // input_shape, zero-filled
  const Shape& in = dx.shape();
  const Shape& out = dy.shape();
  const std::vector<int64_t> starts = ctx.n().attr_ints("starts");
  const std::vector<int64_t> steps = ctx.n().attr_ints("steps");
  const size_t r = in.size();
  // The shape rule checked the ranks of starts/steps; the slice must also lie inside X.
  bool fits = out.size() == r;
  for (size_t a = 0; fits && a < r; ++a) {
    const int64_t last = starts[a] + (out[a] - 1) * steps[a];
    fits = out[a] == 0 ||
           (steps[a] != 0 && starts[a] >= 0 && starts[a] < in[a] && last >= 0 && last < in[a]);
  }
  if (!fits)
    throw ModelError(ctx.n().describe() + ": gradient " + ir::shape_str(out) +
                     " is not a slice of " + ir::shape_str(in) +
                     " with the given starts and steps");
  if (dy.numel() == 0) return;
  if (r == 0) {
    std::memcpy(dx.raw(), dy.raw(), dy.nbytes());
    return;
  }
  const std::vector<int64_t> in_st = ir::strides_of(in), src_st = ir::strides_of(out);
  std::vector<int64_t> dst_st(r);
  int64_t base = 0;
  for (size_t a = 0; a < r; ++a) {
    base += starts[a] * in_st[a];
    dst_st[a] = steps[a] * in_st[a];
  }
  Shape rows = out;  // the last axis is one strided_copy
  rows[r - 1] = 1;
  const int64_t n = out[r - 1], inner_step = dst_st[r - 1];
  const float* s0 = dy.data<float>();
  float* d0 = dx.data<float>() + base;
  walk2_parallel(rows, src_st, dst_st, dy.numel(),
                 [&](int64_t s, int64_t d) { strided_copy(d0 + d, inner_step, s0 + s, 1, n); });
}

}  // namespace

CpuKernel kernel_GatherGrad() {
  return {gather_grad, {ir::DType::kF32}, 0};
}
CpuKernel kernel_SliceGrad() {
  return {slice_grad, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
