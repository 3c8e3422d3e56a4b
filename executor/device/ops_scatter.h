// Shared implementations of GatherElements and ScatterElements. Indices are
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

/// Output element p: data[p] with the updates aimed at it folded in update
/// order (kNone: the last one wins).
template <typename T>
struct ScatterFold {
  const T *data, *upd;
  T* y;
  const int64_t *first, *js;  // CSR: updates js[first[p] .. first[p+1]) target p
  ScatterReduce r;
  PIPETRAIN_HD void operator()(int64_t p) const {
    T v = data[p];
    for (int64_t q = first[p]; q < first[p + 1]; ++q) {
      const T u = upd[js[q]];
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

template <typename Exec>
void scatter_elements_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &data = a.in[0], &upd = a.in[2], &y = a.out[0];
  const ScatterReduce r = scatter_reduction(a.n());
  ElementsIndex geo;
  const std::vector<int64_t> idx = element_indices(a, 1, data.shape, &geo);
  const int64_t n = y.numel();
  if (n == 0) return;
  std::vector<int64_t> target(idx.size()), first(static_cast<size_t>(n) + 1, 0);
  for (size_t j = 0; j < idx.size(); ++j) {
    target[j] = geo.offset(static_cast<int64_t>(j), idx[j]);
    ++first[static_cast<size_t>(target[j]) + 1];
  }
  std::partial_sum(first.begin(), first.end(), first.begin());
  std::vector<int64_t> fill(first.begin(), first.end() - 1), js(idx.size());
  for (size_t j = 0; j < idx.size(); ++j)
    js[static_cast<size_t>(fill[static_cast<size_t>(target[j])]++)] = static_cast<int64_t>(j);
  const int64_t* dfirst = ex.upload(first);
  const int64_t* djs = js.empty() ? nullptr : ex.upload(js);
  with_storage(data.dtype, [&](auto tag) {
    using T = std::decay_t<decltype(tag)>;
    if constexpr (std::is_same_v<T, uint8_t>) {
      if (r != ScatterReduce::kNone)
        throw UnsupportedOp(a.n().describe() + ": a reduction over bool data");
    }
    ex.for_each(n, ScatterFold<T>{data.data<T>(), upd.data<T>(), y.data<T>(), dfirst, djs, r});
  });
}

}  // namespace pipetrain::exec::device
