// Shared implementations of GatherElements, ScatterElements, GatherND and
// ScatterND. Indices are
// read on the host: checked, made non-negative, and for the scatter grouped
// by target (CSR, in update order), so each output element folds its own
// updates in the order a sequential loop would and the result is
// deterministic without atomics.
#pragma once

#include <numeric>
#include <string>
#include <vector>

#include "executor/device/ops_elementwise.h"

namespace pipetrain::exec::device {

/// Element i of the indices tensor: its coordinates with the one at `axis`
/// replaced by k, as an offset into data.
struct ElementsIndex {
  int rank = 0, axis = 0;
  int64_t idx_dims[kMaxDims], data_strides[kMaxDims];
  PIPETRAIN_HD int64_t offset(int64_t i, int64_t k) const {
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = i / idx_dims[d];
      off += (d == axis ? k : i - q * idx_dims[d]) * data_strides[d];
      i = q;
    }
    return off;
  }
};

/// The indices (input `at`) along `axis` of data, checked and non-negative,
/// with the index geometry.
inline std::vector<int64_t> element_indices(const DeviceOpArgs& a, size_t at, const ir::Shape& data,
                                            ElementsIndex* geo) {
  const KernelContext& h = *a.host;
  const ir::Shape& is = h.in(at).shape();
  const int64_t rank = static_cast<int64_t>(data.size());
  if (rank > kMaxDims)
    throw UnsupportedOp(h.n().describe() + ": rank " + std::to_string(rank) +
                        " (the device kernels index at most 8 dims)");
  geo->rank = static_cast<int>(rank);
  geo->axis = static_cast<int>(ir::normalize_axis(h.n().attr_int("axis", 0), rank));
  const std::vector<int64_t> st = contiguous_strides(data);
  for (size_t d = 0; d < data.size(); ++d) {
    geo->idx_dims[d] = is[d];
    geo->data_strides[d] = st[d];
  }
  const int64_t dim = data[static_cast<size_t>(geo->axis)];
  std::vector<int64_t> v = h.in(at).to_i64();
  for (int64_t& k : v) {
    if (k < -dim || k >= dim)
      throw RuntimeFault(h.n().describe() + ": index " + std::to_string(k) +
                         " is out of range for axis " + std::to_string(geo->axis) + " of size " +
                         std::to_string(dim));
    if (k < 0) k += dim;
  }
  return v;
}

template <typename W>
struct GatherElementsMap {
  const W* x;
  W* y;
  const int64_t* idx;
  ElementsIndex geo;
  PIPETRAIN_HD void operator()(int64_t i) const { y[i] = x[geo.offset(i, idx[i])]; }
};

template <typename Exec>
void gather_elements_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  ElementsIndex geo;
  const std::vector<int64_t> idx = element_indices(a, 1, x.shape, &geo);
  if (idx.empty()) return;
  const int64_t* didx = ex.upload(idx);
  with_word(x.dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    ex.for_each(y.numel(), GatherElementsMap<W>{x.data<W>(), y.data<W>(), didx, geo});
  });
}

enum class ScatterReduce { kNone, kAdd, kMul, kMax, kMin };

/// Output element p (in row p / chunk, at p % chunk of it): data[p] with the
/// updates aimed at its row folded in update order (kNone: the last one wins).
template <typename T>
struct ScatterFold {
  const T *data, *upd;
  T* y;
  const int64_t *first, *js;  // CSR: update rows js[first[r] .. first[r+1]) target row r
  ScatterReduce r;
  int64_t chunk = 1;  // elements per row (1: ScatterElements)
  PIPETRAIN_HD void operator()(int64_t p) const {
    T v = data[p];
    const int64_t row = p / chunk, e = p - row * chunk;
    for (int64_t q = first[row]; q < first[row + 1]; ++q) {
      const T u = upd[js[q] * chunk + e];
      switch (r) {
        case ScatterReduce::kNone: v = u; break;
        case ScatterReduce::kAdd: v = wrap_add(v, u); break;
        case ScatterReduce::kMul: v = wrap_mul(v, u); break;
        case ScatterReduce::kMax: v = nan_max(v, u); break;
        case ScatterReduce::kMin: v = nan_min(v, u); break;
      }
    }
    y[p] = v;
  }
};

inline ScatterReduce scatter_reduction(const ir::Node& n) {
  const std::string r = n.attr_string("reduction", "none");
  if (r == "none") return ScatterReduce::kNone;
  if (r == "add") return ScatterReduce::kAdd;
  if (r == "mul") return ScatterReduce::kMul;
  if (r == "max") return ScatterReduce::kMax;
  if (r == "min") return ScatterReduce::kMin;
  throw ModelError(n.describe() + ": unknown reduction '" + r + "' (none, add, mul, max, min)");
}

/// The CSR table of `targets` (one per update, each in [0, rows)): first
/// (rows + 1 entries) and the updates of each target in update order.
inline void group_by_target(const std::vector<int64_t>& target, int64_t rows,
                            std::vector<int64_t>* first, std::vector<int64_t>* js) {
  first->assign(static_cast<size_t>(rows) + 1, 0);
  for (int64_t t : target) ++(*first)[static_cast<size_t>(t) + 1];
  std::partial_sum(first->begin(), first->end(), first->begin());
  std::vector<int64_t> fill(first->begin(), first->end() - 1);
  js->assign(target.size(), 0);
  for (size_t j = 0; j < target.size(); ++j)
    (*js)[static_cast<size_t>(fill[static_cast<size_t>(target[j])]++)] = static_cast<int64_t>(j);
}

/// y = data with update rows (`chunk` elements each) folded into the rows
/// `target` names.
template <typename Exec>
void scatter_rows(Exec& ex, DeviceOpArgs& a, const std::vector<int64_t>& target, int64_t chunk) {
  const DeviceTensor &data = a.in[0], &upd = a.in[2], &y = a.out[0];
  const ScatterReduce r = scatter_reduction(a.n());
  const int64_t n = y.numel();
  if (n == 0) return;
  std::vector<int64_t> first, js;
  group_by_target(target, n / chunk, &first, &js);
  const int64_t* dfirst = ex.upload(first);
  const int64_t* djs = js.empty() ? nullptr : ex.upload(js);
  with_storage(data.dtype, [&](auto tag) {
    using T = std::decay_t<decltype(tag)>;
    if constexpr (std::is_same_v<T, uint8_t>) {
      if (r != ScatterReduce::kNone)
        throw UnsupportedOp(a.n().describe() + ": a reduction over bool data");
    }
    ex.for_each(n,
                ScatterFold<T>{data.data<T>(), upd.data<T>(), y.data<T>(), dfirst, djs, r, chunk});
  });
}

template <typename Exec>
void scatter_elements_op(Exec& ex, DeviceOpArgs& a) {
  ElementsIndex geo;
  const std::vector<int64_t> idx = element_indices(a, 1, a.in[0].shape, &geo);
  std::vector<int64_t> target(idx.size());
  for (size_t j = 0; j < idx.size(); ++j) target[j] = geo.offset(static_cast<int64_t>(j), idx[j]);
  scatter_rows(ex, a, target, 1);
}

/// GatherND / ScatterND: the offset in data of the slice each row of the
/// indices (input `at`) addresses, checked; `chunk` gets the slice size.
inline std::vector<int64_t> nd_offsets(const DeviceOpArgs& a, size_t at, int64_t batch_dims,
                                       int64_t* chunk) {
  const KernelContext& h = *a.host;
  const ir::Shape& data = h.in(0).shape();
  const ir::Shape& is = h.in(at).shape();
  const int64_t k = is.back();
  const std::vector<int64_t> st = contiguous_strides(data);
  *chunk = 1;
  for (size_t d = static_cast<size_t>(batch_dims + k); d < data.size(); ++d) *chunk *= data[d];
  int64_t batches = 1;
  for (int64_t d = 0; d < batch_dims; ++d) batches *= data[static_cast<size_t>(d)];
  const int64_t batch_stride = batch_dims ? st[static_cast<size_t>(batch_dims - 1)] : 0;
  const std::vector<int64_t> idx = h.in(at).to_i64();
  const int64_t rows = static_cast<int64_t>(idx.size()) / k;
  const int64_t per_batch = batches ? rows / batches : 0;
  std::vector<int64_t> off(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t o = per_batch ? (r / per_batch) * batch_stride : 0;
    for (int64_t j = 0; j < k; ++j) {
      const size_t axis = static_cast<size_t>(batch_dims + j);
      int64_t i = idx[static_cast<size_t>(r * k + j)];
      if (i < -data[axis] || i >= data[axis])
        throw RuntimeFault(h.n().describe() + ": index " + std::to_string(i) +
                           " is out of range for axis " + std::to_string(axis) + " of size " +
                           std::to_string(data[axis]));
      o += (i < 0 ? i + data[axis] : i) * st[axis];
    }
    off[static_cast<size_t>(r)] = o;
  }
  return off;
}

/// y[i] = x[the offset of row i / chunk + i % chunk].
template <typename W>
struct GatherRowsMap {
  const W* x;
  W* y;
  const int64_t* off;
  int64_t chunk;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t r = i / chunk;
    y[i] = x[off[r] + i - r * chunk];
  }
};

template <typename Exec>
void gather_nd_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  int64_t chunk = 1;
  const std::vector<int64_t> off = nd_offsets(a, 1, a.n().attr_int("batch_dims", 0), &chunk);
  if (y.numel() == 0) return;
  const int64_t* doff = ex.upload(off);
  with_word(x.dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    ex.for_each(y.numel(), GatherRowsMap<W>{x.data<W>(), y.data<W>(), doff, chunk});
  });
}

template <typename Exec>
void scatter_nd_op(Exec& ex, DeviceOpArgs& a) {
  int64_t chunk = 1;
  std::vector<int64_t> target = nd_offsets(a, 1, 0, &chunk);
  for (int64_t& t : target) t /= chunk;  // slices start at multiples of their size
  scatter_rows(ex, a, target, chunk);
}

}  // namespace pipetrain::exec::device
