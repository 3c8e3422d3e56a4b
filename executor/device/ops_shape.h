// Shared implementations of the data-movement ops: every output element
// finds its source element by index arithmetic (one functor call each), and
// data moves as words of the element size, so every dtype works. Index
// tables (Gather's checked indices, Pad's sources) are built on the host
// from the host copies of the small inputs and uploaded with ex.upload().
#pragma once

#include <algorithm>
#include <numeric>
#include <vector>

#include "executor/device/ops_elementwise.h"
#include "ir/ops/data_movement.h"

namespace pipetrain::exec::device {

template <typename W>
struct Copy {
  const W* x;
  W* y;
  PIPETRAIN_HD void operator()(int64_t i) const { y[i] = x[i]; }
};

/// y[i] = x[base + offset(i)]: permutations, slices and broadcasts.
template <typename W>
struct StridedGather {
  const W* x;
  W* y;
  int64_t base;
  StridedIndex<1> idx;
  PIPETRAIN_HD void operator()(int64_t i) const { y[i] = x[base + idx.offset(i, 0)]; }
};

/// y[base + offset(i)] = x[i]: SliceGrad's scatter into a zeroed dX.
template <typename W>
struct StridedScatter {
  const W* x;
  W* y;
  int64_t base;
  StridedIndex<1> idx;
  PIPETRAIN_HD void operator()(int64_t i) const { y[base + idx.offset(i, 0)] = x[i]; }
};

/// Part of an (outer, axis, inner) tensor `whole` matching piece
/// (outer, len, inner) at axis offset `at`; to_whole copies piece -> whole.
template <typename W>
struct AxisPiece {
  const W* src;
  W* dst;
  int64_t piece_row, whole_row, at;  // elements per outer index; offset in whole's row
  bool to_whole;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t o = i / piece_row, r = i - o * piece_row;
    if (to_whole)
      dst[o * whole_row + at + r] = src[i];
    else
      dst[i] = src[o * whole_row + at + r];
  }
};

/// Gather along an axis: y (outer, K, inner) from x (outer, dim, inner).
template <typename W>
struct GatherRows {
  const W* x;
  W* y;
  const int64_t* idx;  // (K), wrapped into [0, dim)
  int64_t k_n, dim, inner;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t r = i % inner, ok = i / inner, k = ok % k_n, o = ok / k_n;
    y[i] = x[(o * dim + idx[k]) * inner + r];
  }
};

/// GatherGrad: dX (outer, dim, inner) element sums dY (outer, K, inner) over
/// the k with idx[k] = its row, in increasing k (the CPU kernel's order).
struct GatherGradRows {
  const float* dy;
  float* dx;
  const int64_t* first;  // (dim + 1) CSR offsets into ks
  const int64_t* ks;     // positions k grouped by index, increasing within a group
  int64_t k_n, dim, inner;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t r = i % inner, oj = i / inner, j = oj % dim, o = oj / dim;
    float s = 0.0f;
    for (int64_t p = first[j]; p < first[j + 1]; ++p) s += dy[(o * k_n + ks[p]) * inner + r];
    dx[i] = s;
  }
};

/// Pad: output element i reads the source its per-axis tables give, or the fill.
template <typename W>
struct PadGather {
  const W* x;
  W* y;
  const int64_t* src;  // per axis a: out[a] source indices (-1: fill), concatenated
  int rank;
  int64_t out_dims[kMaxDims], table_at[kMaxDims], in_strides[kMaxDims];
  W fill;
  PIPETRAIN_HD void operator()(int64_t i) const {
    int64_t off = 0, rest = i;
    for (int a = rank - 1; a >= 0; --a) {
      const int64_t q = rest / out_dims[a];
      const int64_t s = src[table_at[a] + rest - q * out_dims[a]];
      if (s < 0) {
        y[i] = fill;
        return;
      }
      off += s * in_strides[a];
      rest = q;
    }
    y[i] = x[off];
  }
};

inline int64_t span(const ir::Shape& s, int64_t from, int64_t to) {
  int64_t n = 1;
  for (int64_t a = from; a < to; ++a) n *= s[static_cast<size_t>(a)];
  return n;
}

/// A StridedIndex over `dims` with one operand's strides.
inline StridedIndex<1> strided(const ir::Shape& dims, const std::vector<int64_t>& strides) {
  if (dims.size() > static_cast<size_t>(kMaxDims))
    throw UnsupportedOp("tensors of rank " + std::to_string(dims.size()) +
                        " (the device kernels index at most 8 dims)");
  StridedIndex<1> idx;
  idx.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    idx.dims[d] = dims[d];
    idx.strides[0][d] = strides[d];
  }
  return idx;
}

/// Flatten, Reshape, Squeeze, Unsqueeze, Identity: the same bytes.
template <typename Exec>
void copy_op(Exec& ex, DeviceOpArgs& a) {
  with_word(a.in[0].dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    ex.for_each(a.in[0].numel(), Copy<W>{a.in[0].data<W>(), a.out[0].data<W>()});
  });
}

template <typename Exec>
void transpose_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  const size_t rank = x.shape.size();
  std::vector<int64_t> perm = a.n().attr_ints("perm");
  if (!a.n().has_attr("perm"))
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  const std::vector<int64_t> in_st = ir::strides_of(x.shape);
  std::vector<int64_t> st(rank);
  for (size_t d = 0; d < rank; ++d) st[d] = in_st[static_cast<size_t>(perm[d])];
  with_word(x.dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    ex.for_each(y.numel(), StridedGather<W>{x.data<W>(), y.data<W>(), 0, strided(y.shape, st)});
  });
}

template <typename Exec>
void expand_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  with_word(x.dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    ex.for_each(y.numel(), BroadcastCopy<W>{x.data<W>(), y.data<W>(),
                                            broadcast_index<1>(y.shape, {&x.shape})});
  });
}

/// Concat (to_whole) or Split: pieces along `axis` of the whole tensor.
template <typename Exec>
void axis_pieces(Exec& ex, DeviceOpArgs& a, bool concat) {
  const DeviceTensor& whole = concat ? a.out[0] : a.in[0];
  const std::vector<DeviceTensor>& pieces = concat ? a.in : a.out;
  const int64_t rank = static_cast<int64_t>(whole.shape.size());
  const int64_t axis = ir::normalize_axis(a.n().attr_int("axis", 0), rank);
  const int64_t inner = span(whole.shape, axis + 1, rank);
  const int64_t whole_row = whole.shape[static_cast<size_t>(axis)] * inner;
  int64_t at = 0;
  with_word(whole.dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    for (const DeviceTensor& p : pieces) {
      const int64_t row = p.shape[static_cast<size_t>(axis)] * inner;
      if (row > 0)
        ex.for_each(p.numel(), AxisPiece<W>{concat ? p.data<W>() : whole.data<W>(),
                                            concat ? whole.data<W>() : p.data<W>(), row, whole_row,
                                            at, concat});
      at += row;
    }
  });
}

template <typename Exec>
void concat_op(Exec& ex, DeviceOpArgs& a) {
  axis_pieces(ex, a, true);
}

template <typename Exec>
void split_op(Exec& ex, DeviceOpArgs& a) {
  axis_pieces(ex, a, false);
}

inline std::vector<int64_t> host_ints(const KernelContext& h, size_t i) {
  return h.has_in(i) ? h.in(i).to_i64() : std::vector<int64_t>{};
}

template <typename Exec>
void slice_op(Exec& ex, DeviceOpArgs& a) {
  const KernelContext& h = *a.host;
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  const ir::SliceSpec spec = ir::resolve_slice(x.shape, h.in(1).to_i64(), h.in(2).to_i64(),
                                               host_ints(h, 3), host_ints(h, 4));
  const std::vector<int64_t> in_st = ir::strides_of(x.shape);
  std::vector<int64_t> st(in_st.size());
  int64_t base = 0;
  for (size_t d = 0; d < st.size(); ++d) {
    base += spec.start[d] * in_st[d];
    st[d] = spec.step[d] * in_st[d];
  }
  with_word(x.dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    ex.for_each(y.numel(), StridedGather<W>{x.data<W>(), y.data<W>(), base, strided(y.shape, st)});
  });
}

/// dX (zero-filled by the runner) gets dY at the slice's positions.
template <typename Exec>
void slice_grad_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &dy = a.in[0], &dx = a.out[0];
  const ir::Shape &in = dx.shape, &out = dy.shape;
  const std::vector<int64_t> starts = a.n().attr_ints("starts"), steps = a.n().attr_ints("steps");
  const size_t r = in.size();
  bool fits = out.size() == r && starts.size() == r && steps.size() == r;
  for (size_t d = 0; fits && d < r; ++d) {
    const int64_t last = starts[d] + (out[d] - 1) * steps[d];
    fits = out[d] == 0 ||
           (steps[d] != 0 && starts[d] >= 0 && starts[d] < in[d] && last >= 0 && last < in[d]);
  }
  if (!fits)
    throw ModelError(a.n().describe() + ": gradient " + ir::shape_str(out) + " is not a slice of " +
                     ir::shape_str(in) + " with the given starts and steps");
  const std::vector<int64_t> in_st = ir::strides_of(in);
  std::vector<int64_t> st(r);
  int64_t base = 0;
  for (size_t d = 0; d < r; ++d) {
    base += starts[d] * in_st[d];
    st[d] = steps[d] * in_st[d];
  }
  ex.for_each(dy.numel(),
              StridedScatter<float>{dy.data<float>(), dx.data<float>(), base, strided(out, st)});
}

/// Indices of input `i` wrapped into [0, dim), checked on the host.
inline std::vector<int64_t> checked_indices(const KernelContext& h, size_t i, int64_t dim) {
  std::vector<int64_t> v = h.in(i).to_i64();
  for (int64_t& k : v) {
    if (k < -dim || k >= dim)
      throw RuntimeFault(h.n().describe() + ": index " + std::to_string(k) +
                         " is out of range for an axis of size " + std::to_string(dim));
    if (k < 0) k += dim;
  }
  return v;
}

template <typename Exec>
void gather_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const int64_t axis = ir::normalize_axis(a.n().attr_int("axis", 0), rank);
  const int64_t dim = x.shape[static_cast<size_t>(axis)];
  const std::vector<int64_t> idx = checked_indices(*a.host, 1, dim);
  const int64_t inner = span(x.shape, axis + 1, rank);
  if (inner == 0 || idx.empty()) return;
  const int64_t* didx = ex.upload(idx);
  with_word(x.dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    ex.for_each(y.numel(), GatherRows<W>{x.data<W>(), y.data<W>(), didx,
                                         static_cast<int64_t>(idx.size()), dim, inner});
  });
}

template <typename Exec>
void gather_grad_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &dy = a.in[0], &dx = a.out[0];
  const ir::Shape& data = dx.shape;
  const int64_t rank = static_cast<int64_t>(data.size());
  const int64_t axis = ir::normalize_axis(a.n().attr_int("axis", 0), rank);
  const int64_t dim = data[static_cast<size_t>(axis)];
  const std::vector<int64_t> idx = checked_indices(*a.host, 1, dim);
  const int64_t outer = span(data, 0, axis), inner = span(data, axis + 1, rank);
  const int64_t k_n = static_cast<int64_t>(idx.size());
  if (dy.numel() != outer * k_n * inner)
    throw ModelError(a.n().describe() + ": gradient " + ir::shape_str(dy.shape) +
                     " does not match data " + ir::shape_str(data) + " gathered by " +
                     ir::shape_str(a.in[1].shape) + " along axis " + std::to_string(axis));
  if (dx.numel() == 0) return;
  // CSR: for each row j, the k that gathered it, increasing.
  std::vector<int64_t> first(static_cast<size_t>(dim) + 1, 0), ks(idx.size());
  for (int64_t j : idx) ++first[static_cast<size_t>(j) + 1];
  std::partial_sum(first.begin(), first.end(), first.begin());
  std::vector<int64_t> fill(first.begin(), first.end() - 1);
  for (int64_t k = 0; k < k_n; ++k)
    ks[static_cast<size_t>(fill[static_cast<size_t>(idx[static_cast<size_t>(k)])]++)] = k;
  ex.for_each(dx.numel(), GatherGradRows{dy.data<float>(), dx.data<float>(), ex.upload(first),
                                         ks.empty() ? nullptr : ex.upload(ks), k_n, dim, inner});
}

template <typename Exec>
void pad_op(Exec& ex, DeviceOpArgs& a) {
  const KernelContext& h = *a.host;
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  const ir::PadMode mode = ir::pad_mode_from_string(a.n().attr_string("mode", "constant"));
  const ir::PadSpec spec = ir::resolve_pads(x.shape, h.in(1).to_i64(), host_ints(h, 3), mode);
  const size_t r = spec.out.size();
  if (r > static_cast<size_t>(kMaxDims))
    throw UnsupportedOp("Pad of rank " + std::to_string(r) + " on the device (at most 8 dims)");
  if (y.numel() == 0) return;
  std::vector<int64_t> table;
  const std::vector<int64_t> in_st = ir::strides_of(x.shape);
  with_word(x.dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    PadGather<W> g{};
    g.x = x.data<W>();
    g.y = y.data<W>();
    g.rank = static_cast<int>(r);
    g.fill = h.has_in(2) ? *h.in(2).data<W>() : W{0};
    for (size_t d = 0; d < r; ++d) {
      g.out_dims[d] = spec.out[d];
      g.table_at[d] = static_cast<int64_t>(table.size());
      g.in_strides[d] = in_st[d];
      for (int64_t i = 0; i < spec.out[d]; ++i)
        table.push_back(ir::pad_source_index(i - spec.begin[d], x.shape[d], mode));
    }
    g.src = table.empty() ? nullptr : ex.upload(table);
    if (r == 0) {
      ex.for_each(1, Copy<W>{x.data<W>(), y.data<W>()});
      return;
    }
    ex.for_each(y.numel(), g);
  });
}

}  // namespace pipetrain::exec::device
