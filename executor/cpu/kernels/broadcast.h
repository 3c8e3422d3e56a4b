// Numpy broadcasting for CPU kernels. A BroadcastPlan right-aligns every
// input against the output shape, gives broadcast dimensions stride 0, drops
// size-1 output dimensions and merges adjacent dimensions that stay linear for
// every input. After that the innermost stride of each input is 0 or 1, so the
// row loops below are plain or scalar-broadcast loops the compiler vectorises.
// Same-shape and scalar operands skip the plan altogether.
#pragma once

#include <array>
#include <cassert>
#include <cstdint>
#include <vector>

#include "executor/cpu/kernels/cpu_threads.h"
#include "ir/shape.h"

namespace pipetrain::exec::cpu {

template <size_t N>
struct BroadcastPlan {
  ir::Shape dims;                               // coalesced output dims, never empty
  std::array<std::vector<int64_t>, N> strides;  // per input, element strides (0 = broadcast)
};

/// Plans iterating `out` (row-major) with each input broadcast onto it.
template <size_t N>
BroadcastPlan<N> plan_broadcast(const ir::Shape& out, const std::array<const ir::Shape*, N>& in) {
  const size_t rank = out.size();
  BroadcastPlan<N> raw;
  for (size_t k = 0; k < N; ++k) {
    const ir::Shape& s = *in[k];
    assert(s.size() <= rank);
    std::vector<int64_t> st(rank, 0);
    int64_t acc = 1;
    for (size_t i = s.size(); i-- > 0;) {
      size_t o = i + rank - s.size();
      assert(s[i] == out[o] || s[i] == 1);
      st[o] = s[i] == 1 ? 0 : acc;
      acc *= s[i];
    }
    raw.strides[k] = std::move(st);
  }
  BroadcastPlan<N> plan;
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    bool merge = !plan.dims.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = plan.strides[k].back() == raw.strides[k][d] * out[d];
    if (merge) {
      plan.dims.back() *= out[d];
      for (size_t k = 0; k < N; ++k) plan.strides[k].back() = raw.strides[k][d];
    } else {
      plan.dims.push_back(out[d]);
      for (size_t k = 0; k < N; ++k) plan.strides[k].push_back(raw.strides[k][d]);
    }
  }
  if (plan.dims.empty()) {  // every dim is 1: one element
    plan.dims.push_back(1);
    for (size_t k = 0; k < N; ++k) plan.strides[k].push_back(0);
  }
  return plan;
}

/// Rows of the plan: the product of its outer dims.
template <size_t N>
int64_t row_count(const BroadcastPlan<N>& plan) {
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < plan.dims.size(); ++d) rows *= plan.dims[d];
  return rows;
}

/// Calls row(out_offset, in_offsets) for the innermost rows [begin, end) of
/// the plan, in row-major order; the row has plan.dims.back() elements and
/// input k steps by plan.strides[k].back() (0 or 1) along it.
template <size_t N, typename Row>
void for_each_row(const BroadcastPlan<N>& plan, int64_t begin, int64_t end, Row&& row) {
  const size_t outer_rank = plan.dims.size() - 1;
  const int64_t inner = plan.dims.back();
  if (begin >= end || inner == 0) return;
  // The odometer at row `begin`: its outer index and every input's offset.
  std::vector<int64_t> idx(outer_rank, 0);
  std::array<int64_t, N> off{};
  for (int64_t d = static_cast<int64_t>(outer_rank) - 1, r = begin; d >= 0; --d) {
    idx[d] = r % plan.dims[d];
    r /= plan.dims[d];
    for (size_t k = 0; k < N; ++k) off[k] += idx[d] * plan.strides[k][d];
  }
  for (int64_t r = begin; r < end; ++r) {
    row(r * inner, off);
    // Odometer step over the outer dims, keeping input offsets incremental.
    for (size_t d = outer_rank; d-- > 0;) {
      for (size_t k = 0; k < N; ++k) off[k] += plan.strides[k][d];
      if (++idx[d] < plan.dims[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= plan.strides[k][d] * plan.dims[d];
      idx[d] = 0;
    }
  }
}

/// for_each_row over every row, the rows cut into parts by parallel_for.
template <size_t N, typename Row>
void for_each_row_parallel(const BroadcastPlan<N>& plan, int64_t cost_per_element, Row&& row) {
  const int64_t rows = row_count(plan), inner = plan.dims.back();
  parallel_for(
      rows, rows * inner * cost_per_element,
      [&](int64_t begin, int64_t end) { for_each_row(plan, begin, end, row); },
      inner >= 16 ? 1 : (16 + inner - 1) / inner);
}

/// out = f(a, b) with numpy broadcasting; `out` has shape so = broadcast(sa, sb).
/// `out` may alias `a` when sa == so (used by the variadic Max/Min). Runs over
/// threads by parallel_for; every element is computed as on one thread.
template <typename A, typename B, typename R, typename F>
void binary_broadcast(const A* a, const ir::Shape& sa, const B* b, const ir::Shape& sb, R* out,
                      const ir::Shape& so, F f) {
  const int64_t n = ir::numel(so);
  if (n == 0) return;
  if (sa == so && sb == so) {
    for_each_index(n, 1, [&](int64_t i) { out[i] = f(a[i], b[i]); });
    return;
  }
  if (sa == so && ir::numel(sb) == 1) {
    const B bv = b[0];
    for_each_index(n, 1, [&](int64_t i) { out[i] = f(a[i], bv); });
    return;
  }
  if (sb == so && ir::numel(sa) == 1) {
    const A av = a[0];
    for_each_index(n, 1, [&](int64_t i) { out[i] = f(av, b[i]); });
    return;
  }
  const auto plan = plan_broadcast<2>(so, {&sa, &sb});
  const int64_t inner = plan.dims.back();
  const int64_t step_a = plan.strides[0].back(), step_b = plan.strides[1].back();
  for_each_row_parallel(plan, 1, [&](int64_t o, const std::array<int64_t, 2>& off) {
    const A* pa = a + off[0];
    const B* pb = b + off[1];
    R* po = out + o;
    if (step_a == 1 && step_b == 1) {
      for (int64_t i = 0; i < inner; ++i) po[i] = f(pa[i], pb[i]);
    } else if (step_a == 1) {
      const B bv = *pb;
      for (int64_t i = 0; i < inner; ++i) po[i] = f(pa[i], bv);
    } else if (step_b == 1) {
      const A av = *pa;
      for (int64_t i = 0; i < inner; ++i) po[i] = f(av, pb[i]);
    } else {
      const R v = f(*pa, *pb);
      for (int64_t i = 0; i < inner; ++i) po[i] = v;
    }
  });
}

/// out = f(c, x, y) with three-way numpy broadcasting (Where).
template <typename C, typename T, typename R, typename F>
void ternary_broadcast(const C* c, const ir::Shape& sc, const T* x, const ir::Shape& sx, const T* y,
                       const ir::Shape& sy, R* out, const ir::Shape& so, F f) {
  const int64_t n = ir::numel(so);
  if (n == 0) return;
  if (sc == so && sx == so && sy == so) {
    for_each_index(n, 1, [&](int64_t i) { out[i] = f(c[i], x[i], y[i]); });
    return;
  }
  const auto plan = plan_broadcast<3>(so, {&sc, &sx, &sy});
  const int64_t inner = plan.dims.back();
  const int64_t step_c = plan.strides[0].back(), step_x = plan.strides[1].back(),
                step_y = plan.strides[2].back();
  for_each_row_parallel(plan, 1, [&](int64_t o, const std::array<int64_t, 3>& off) {
    const C* pc = c + off[0];
    const T* px = x + off[1];
    const T* py = y + off[2];
    R* po = out + o;
    for (int64_t i = 0; i < inner; ++i) po[i] = f(pc[i * step_c], px[i * step_x], py[i * step_y]);
  });
}

/// Copies `in` (shape si) broadcast onto `out` (shape so).
template <typename T>
void broadcast_copy(const T* in, const ir::Shape& si, T* out, const ir::Shape& so) {
  const int64_t n = ir::numel(so);
  if (n == 0) return;
  if (si == so) {
    for_each_index(n, 1, [&](int64_t i) { out[i] = in[i]; });
    return;
  }
  const auto plan = plan_broadcast<1>(so, {&si});
  const int64_t inner = plan.dims.back();
  const int64_t step = plan.strides[0].back();
  for_each_row_parallel(plan, 1, [&](int64_t o, const std::array<int64_t, 1>& off) {
    const T* p = in + off[0];
    T* po = out + o;
    if (step == 1) {
      for (int64_t i = 0; i < inner; ++i) po[i] = p[i];
    } else {
      for (int64_t i = 0; i < inner; ++i) po[i] = *p;
    }
  });
}

}  // namespace pipetrain::exec::cpu
