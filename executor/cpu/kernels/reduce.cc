// CPU kernels of ReduceMean, ReduceSum and ReduceMax. The input is walked in
// row-major order with the output broadcast onto it (stride 0 on reduced
// dims): an innermost reduced run is folded with the fixed-order row
// reduction, an innermost kept run accumulates elementwise (vectorised). The
// order is fixed, so results are deterministic.
#include <cstring>
#include <limits>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/broadcast.h"
#include "executor/cpu/kernels/ew_common.h"

namespace pipetrain::exec::cpu {

namespace {

using ir::DType;
using ir::Tensor;

enum class Reduce { kSum, kMean, kMax };

/// Which input dims are reduced; empty when the op is an identity
/// (no axes and noop_with_empty_axes = 1). The schema validated the axes.
std::vector<bool> reduced_dims(const KernelContext& ctx, size_t rank, bool* noop) {
  std::vector<int64_t> axes;
  if (ctx.has_in(1))
    axes = ctx.in(1).to_i64();
  else
    axes = ctx.n().attr_ints("axes");
  *noop = axes.empty() && ctx.n().attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes)
    reduced[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(rank) : a)] = true;
  return reduced;
}

template <Reduce kOp, typename T>
void reduce_typed(const Tensor& xt, Tensor& yt, const std::vector<bool>& reduced) {
  const ir::Shape& in = xt.shape();
  ir::Shape kept = in;  // output shape with reduced dims kept as 1
  int64_t count = 1;    // elements folded into each output
  for (size_t d = 0; d < in.size(); ++d)
    if (reduced[d]) {
      count *= in[d];
      kept[d] = 1;
    }
  const T* x = xt.data<T>();  // (in)
  T* y = yt.data<T>();        // (kept)
  const int64_t n_out = yt.numel();
  const auto plan = plan_broadcast<1>(in, {&kept});
  const int64_t inner = plan.dims.back();
  const bool inner_reduced = plan.strides[0].back() == 0;

  if constexpr (kOp == Reduce::kMax) {
    const T lowest = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity()
                                                 : std::numeric_limits<T>::lowest();
    for (int64_t i = 0; i < n_out; ++i) y[i] = lowest;
    for_each_row(plan, [&](int64_t in_off, const std::array<int64_t, 1>& off) {
      const T* px = x + in_off;
      T* py = y + off[0];
      if (inner_reduced)
        *py = nan_max(*py, max_row(px, inner));
      else
        for (int64_t i = 0; i < inner; ++i) py[i] = nan_max(py[i], px[i]);
    });
  } else {
    using A = acc_t<T>;                                    // double for f32
    std::vector<A> acc(static_cast<size_t>(n_out), A{0});  // (kept)
    A* pa = acc.data();
    for_each_row(plan, [&](int64_t in_off, const std::array<int64_t, 1>& off) {
      const T* px = x + in_off;
      A* py = pa + off[0];
      if (inner_reduced)
        *py = wrap_add(*py, sum_row(px, inner));
      else
        for (int64_t i = 0; i < inner; ++i) py[i] = wrap_add(py[i], static_cast<A>(px[i]));
    });
    if constexpr (kOp == Reduce::kMean) {
      // count = 0 gives 0 / 0 = NaN, as numpy's mean of nothing.
      for (int64_t i = 0; i < n_out; ++i) y[i] = static_cast<T>(pa[i] / static_cast<A>(count));
    } else {
      for (int64_t i = 0; i < n_out; ++i) y[i] = static_cast<T>(pa[i]);
    }
  }
}

template <Reduce kOp>
void reduce_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  bool noop = false;
  const std::vector<bool> reduced = reduced_dims(ctx, x.shape().size(), &noop);
  if (noop) {
    if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
    return;
  }
  if constexpr (kOp == Reduce::kMean) {
    reduce_typed<kOp, float>(x, y, reduced);
  } else {
    dispatch<float, int64_t, int32_t>(
        x.dtype(), [&](auto tag) { reduce_typed<kOp, decltype(tag)>(x, y, reduced); });
  }
}

}  // namespace

CpuKernel kernel_ReduceMean() {
  return {with_f32<reduce_kernel<Reduce::kMean>>, {DType::kF32, DType::kF16, DType::kBF16}, 0};
}
CpuKernel kernel_ReduceSum() {
  return {with_f32<reduce_kernel<Reduce::kSum>>,
          {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32},
          0};
}
CpuKernel kernel_ReduceMax() {
  return {with_f32<reduce_kernel<Reduce::kMax>>,
          {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32},
          0};
}

}  // namespace pipetrain::exec::cpu
