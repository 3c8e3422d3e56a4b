// Shared by the elementwise, activation, reduce and loss CPU kernels: dtype
// dispatch, the f16/bf16-through-f32 adapter, fixed-order row reductions and
// the softmax the losses share.
#pragma once

#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/cpu/kernels/vec_math.h"
#include "executor/device/elementwise_math.h"
#include "executor/device/row_math.h"
#include "ir/tensor.h"

namespace pipetrain::exec::cpu {

/// parallel_for's work per element of a loop that evaluates exp, erf, tanh or
/// a hash (against 1 for an add): such loops are worth splitting sooner.
constexpr int64_t kMathCost = 8;

/// The dtype whose elements are stored as T (bool is stored as uint8_t).
template <typename T>
constexpr ir::DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return ir::DType::kF32;
  if constexpr (std::is_same_v<T, int64_t>) return ir::DType::kI64;
  if constexpr (std::is_same_v<T, int32_t>) return ir::DType::kI32;
  if constexpr (std::is_same_v<T, uint8_t>) return ir::DType::kBool;
  return ir::DType::kUndefined;
}

/// Calls f(T{}) for the T among Ts stored as dtype t. Kernels list the dtypes
/// they accept, so t is always one of Ts (f16/bf16 reach with_f32 kernels as f32).
template <typename... Ts, typename F>
void dispatch(ir::DType t, F&& f) {
  [[maybe_unused]] bool found = ((t == dtype_of<Ts>() ? (f(Ts{}), true) : false) || ...);
  assert(found && "dtype not listed by the kernel");
}

/// Runs fn with every f16/bf16 input and output swapped for an f32 copy, then
/// rounds the f32 outputs back to their dtype (round to nearest even). Each op
/// then computes in f32 and rounds once, as numpy does for half arithmetic.
void run_via_f32(KernelContext& ctx, KernelFn fn);
bool has_half_tensor(const KernelContext& ctx);

/// A kernel that also accepts f16/bf16 tensors by computing in f32.
template <KernelFn Fn>
void with_f32(KernelContext& ctx) {
  if (has_half_tensor(ctx))
    run_via_f32(ctx, Fn);
  else
    Fn(ctx);
}

using device::float_to_int;
using device::nan_max;
using device::nan_min;
using device::wrap_add;
using device::wrap_mul;
using device::wrap_sub;

using device::acc_t;
using device::kLanes;
using device::sum_row;

/// max of x[0..n) (n >= 1), NaN propagating (device::max_row's lane order).
template <typename T>
T max_row(const T* x, int64_t n) {
  return device::max_row(x, n);
}

/// The f32 max vectorised (device::max_row_f32), identical in result.
template <>
inline float max_row<float>(const float* x, int64_t n) {
  return device::max_row_f32(x, n);
}

/// softmax(x)_j = e^(x_j - m) / sum_k e^(x_k - m) with m = max_k x_k, or
/// log_softmax(x)_j = x_j - m - log sum_k e^(x_k - m), along the middle axis of
/// x viewed as (outer, n, inner); y has the same layout. Sums run in a fixed
/// order. Defined in activation.cc; the losses use it too.
void softmax_f32(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log);

}  // namespace pipetrain::exec::cpu
