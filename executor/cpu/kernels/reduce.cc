// CPU kernels of the Reduce* family. The input is walked in row-major order
// with the output broadcast onto it (stride 0 on reduced dims): an innermost
// reduced run is folded with the fixed-order row fold, an innermost kept run
// accumulates elementwise (vectorised). The per-element math and the order
// are device/reduce_math.h's, so results are deterministic and the device's.
#include <cstring>
#include <limits>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/broadcast.h"
#include "executor/cpu/kernels/ew_common.h"
#include "executor/device/reduce_math.h"

namespace pipetrain::exec::cpu {

namespace {

using device::Reduce;
using ir::DType;
using ir::Tensor;

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

/// y (the input's shape with reduced dims 1, as `kept`) = the fold of x;
/// m: per output, the max LogSumExp shifts by (else unused).
template <Reduce kOp, typename T>
void fold(const Tensor& xt, T* y, const ir::Shape& kept, int64_t count, const T* m) {
  using A = acc_t<T>;
  const T* x = xt.data<T>();
  const int64_t n_out = ir::numel(kept);
  std::vector<A> acc(static_cast<size_t>(n_out), device::reduce_init<kOp, T>());
  A* pa = acc.data();
  const auto plan = plan_broadcast<1>(xt.shape(), {&kept});
  const int64_t inner = plan.dims.back();
  const bool inner_reduced = plan.strides[0].back() == 0;
  const int64_t rows = row_count(plan);
  if (inner_reduced) {
    // Serial: several rows may fold into one output, in row order.
    for_each_row(plan, 0, rows, [&](int64_t in_off, const std::array<int64_t, 1>& off) {
      const T* px = x + in_off;
      A* py = pa + off[0];
      const T* pm = m ? m + off[0] : nullptr;
      *py = device::reduce_combine<kOp>(*py, device::reduce_row<kOp>(px, inner, pm ? *pm : T{}));
    });
  } else {
    // Each row adds into a row of outputs element by element (a bias gradient's
    // sum over the batch): the row's columns split over threads, each column
    // folded over the rows in row order as on one thread.
    parallel_for(inner, rows * inner, [&](int64_t i0, int64_t i1) {
      for_each_row(plan, 0, rows, [&](int64_t in_off, const std::array<int64_t, 1>& off) {
        const T* px = x + in_off;
        A* py = pa + off[0];
        const T* pm = m ? m + off[0] : nullptr;
        for (int64_t i = i0; i < i1; ++i)
          py[i] = device::reduce_element<kOp>(py[i], px[i], pm ? pm[i] : T{});
      });
    });
  }
  for (int64_t i = 0; i < n_out; ++i)
    y[i] = device::reduce_finish<kOp, T>(pa[i], count, m ? m[i] : T{});
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
  if constexpr (kOp == Reduce::kLogSumExp) {
    std::vector<T> m(static_cast<size_t>(yt.numel()));  // e^(x - max) cannot overflow
    fold<Reduce::kMax, T>(xt, m.data(), kept, count, nullptr);
    fold<kOp, T>(xt, yt.data<T>(), kept, count, m.data());
  } else {
    fold<kOp, T>(xt, yt.data<T>(), kept, count, nullptr);
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
  if constexpr (device::kReducesIntegers<kOp>) {
    dispatch<float, int64_t, int32_t>(
        x.dtype(), [&](auto tag) { reduce_typed<kOp, decltype(tag)>(x, y, reduced); });
  } else {
    reduce_typed<kOp, float>(x, y, reduced);
  }
}

template <Reduce kOp>
CpuKernel reduce_cpu_kernel() {
  if constexpr (device::kReducesIntegers<kOp>)
    return {with_f32<reduce_kernel<kOp>>,
            {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32},
            0};
  else
    return {with_f32<reduce_kernel<kOp>>, {DType::kF32, DType::kF16, DType::kBF16}, 0};
}

}  // namespace

CpuKernel kernel_ReduceMean() {
  return reduce_cpu_kernel<Reduce::kMean>();
}
CpuKernel kernel_ReduceSum() {
  return reduce_cpu_kernel<Reduce::kSum>();
}
CpuKernel kernel_ReduceMax() {
  return reduce_cpu_kernel<Reduce::kMax>();
}
CpuKernel kernel_ReduceMin() {
  return reduce_cpu_kernel<Reduce::kMin>();
}
CpuKernel kernel_ReduceProd() {
  return reduce_cpu_kernel<Reduce::kProd>();
}
CpuKernel kernel_ReduceL1() {
  return reduce_cpu_kernel<Reduce::kL1>();
}
CpuKernel kernel_ReduceL2() {
  return reduce_cpu_kernel<Reduce::kL2>();
}
CpuKernel kernel_ReduceSumSquare() {
  return reduce_cpu_kernel<Reduce::kSumSquare>();
}
CpuKernel kernel_ReduceLogSum() {
  return reduce_cpu_kernel<Reduce::kLogSum>();
}
CpuKernel kernel_ReduceLogSumExp() {
  return reduce_cpu_kernel<Reduce::kLogSumExp>();
}

}  // namespace pipetrain::exec::cpu
