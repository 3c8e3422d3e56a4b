// The Reduce* family's per-element math, shared by the CPU kernels
// (cpu/kernels/reduce.cc) and the device functor (ops_reduce.h) so both fold
// the same values in the same order: each element is mapped (|x|, x^2,
// e^(x - max)), folded with the fixed-order row functions, and the fold
// finished (mean, sqrt, log).
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "executor/device/row_math.h"

namespace pipetrain::exec::device {

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

/// The ops that take integers as well as floats (the others: f32 only).
template <Reduce kOp>
inline constexpr bool kReducesIntegers =
    kOp == Reduce::kSum || kOp == Reduce::kMax || kOp == Reduce::kMin || kOp == Reduce::kProd ||
    kOp == Reduce::kL1 || kOp == Reduce::kSumSquare;

/// Max and Min fold with nan_max / nan_min; Prod multiplies; the rest add
/// mapped elements.
template <Reduce kOp>
inline constexpr bool kSelects = kOp == Reduce::kMax || kOp == Reduce::kMin;

/// The element as the sum folds it (m: the output's max, for LogSumExp).
template <Reduce kOp, typename T>
PIPETRAIN_HD acc_t<T> reduce_map(T v, T m) {
  using A = acc_t<T>;
  const A a = static_cast<A>(v);
  if constexpr (kOp == Reduce::kL1) return a < 0 ? wrap_sub(A{0}, a) : a;
  if constexpr (kOp == Reduce::kL2 || kOp == Reduce::kSumSquare) return wrap_mul(a, a);
  if constexpr (kOp == Reduce::kLogSumExp) return ::exp(a - static_cast<A>(m));
  return a;
}

/// The output from the folded value (count: elements folded; m as above).
template <Reduce kOp, typename T>
PIPETRAIN_HD T reduce_finish(acc_t<T> acc, int64_t count, T m) {
  using A = acc_t<T>;
  if constexpr (kOp == Reduce::kMean) return static_cast<T>(acc / static_cast<A>(count));
  if constexpr (kOp == Reduce::kL2) return static_cast<T>(::sqrt(static_cast<double>(acc)));
  if constexpr (kOp == Reduce::kLogSum) return static_cast<T>(::log(static_cast<double>(acc)));
  if constexpr (kOp == Reduce::kLogSumExp)
    return static_cast<T>(::log(static_cast<double>(acc)) + static_cast<double>(m));
  return static_cast<T>(acc);
}

/// The fold's start: -inf / +inf (or the integer limits) for Max / Min, 1 for Prod, else 0.
template <Reduce kOp, typename T>
PIPETRAIN_HD acc_t<T> reduce_init() {
  if constexpr (kOp == Reduce::kMax) {
    if constexpr (std::is_floating_point_v<T>)
      return -INFINITY;
    else
      return std::numeric_limits<T>::lowest();
  } else if constexpr (kOp == Reduce::kMin) {
    if constexpr (std::is_floating_point_v<T>)
      return INFINITY;
    else
      return std::numeric_limits<T>::max();
  } else if constexpr (kOp == Reduce::kProd) {
    return acc_t<T>{1};
  } else {
    return acc_t<T>{0};
  }
}

/// Folds one more value into acc.
template <Reduce kOp, typename A>
PIPETRAIN_HD A reduce_combine(A acc, A v) {
  if constexpr (kOp == Reduce::kMax) return nan_max(acc, v);
  if constexpr (kOp == Reduce::kMin) return nan_min(acc, v);
  if constexpr (kOp == Reduce::kProd) return wrap_mul(acc, v);
  return wrap_add(acc, v);
}

/// Folds x[0..n) in kLanes interleaved lanes combined pairwise (sum_row's
/// order), mapped as the sum folds them; Max/Min/Prod fold the values as
/// they are (in acc_t: exact for Max/Min).
template <Reduce kOp, typename T>
PIPETRAIN_HD acc_t<T> reduce_row(const T* x, int64_t n, T m) {
  using A = acc_t<T>;
  A acc[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) acc[l] = reduce_init<kOp, T>();
  auto value = [&](int64_t i) -> A {
    if constexpr (kSelects<kOp> || kOp == Reduce::kProd)
      return static_cast<A>(x[i]);
    else
      return reduce_map<kOp>(x[i], m);
  };
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] = reduce_combine<kOp>(acc[l], value(i + l));
  for (int64_t l = 0; i + l < n; ++l) acc[l] = reduce_combine<kOp>(acc[l], value(i + l));
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t l = 0; l < w; ++l) acc[l] = reduce_combine<kOp>(acc[l], acc[l + w]);
  return acc[0];
}

/// One element folded in where the walk is elementwise (an innermost kept run).
template <Reduce kOp, typename T>
PIPETRAIN_HD acc_t<T> reduce_element(acc_t<T> acc, T v, T m) {
  using A = acc_t<T>;
  if constexpr (kSelects<kOp> || kOp == Reduce::kProd)
    return reduce_combine<kOp>(acc, static_cast<A>(v));
  else
    return reduce_combine<kOp>(acc, reduce_map<kOp>(v, m));
}

}  // namespace pipetrain::exec::device
