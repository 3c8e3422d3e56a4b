// Fixed-order row reductions shared by the CPU kernels and the device
// kernels: kLanes interleaved partial accumulators combined pairwise, so a
// result is deterministic and the same wherever it is computed (a CPU loop
// that vectorises, one GPU thread).
#pragma once

#include <cstdint>
#include <type_traits>

#include "executor/device/elementwise_math.h"
#include "executor/device/hd.h"

namespace pipetrain::exec::device {

/// Number of interleaved partial accumulators in the row reductions: lane l
/// sums elements l, l+16, ...; lanes combine pairwise.
inline constexpr int64_t kLanes = 16;

/// Accumulator of sums: double for floats (f32 sums of long rows drift
/// otherwise), the type itself (wrapping) for integers.
template <typename T>
using acc_t = std::conditional_t<std::is_floating_point_v<T>, double, T>;

/// sum of x[0..n), accumulated in acc_t<T>.
template <typename T>
PIPETRAIN_HD acc_t<T> sum_row(const T* x, int64_t n) {
  using A = acc_t<T>;
  A acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] = wrap_add(acc[l], static_cast<A>(x[i + l]));
  const int64_t rest = n - i;  // < kLanes
  for (int64_t l = 0; l < rest; ++l) acc[l] = wrap_add(acc[l], static_cast<A>(x[i + l]));
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t l = 0; l < w; ++l) acc[l] = wrap_add(acc[l], acc[l + w]);
  return acc[0];
}

/// max of x[0..n) (n >= 1), NaN propagating.
template <typename T>
PIPETRAIN_HD T max_row(const T* x, int64_t n) {
  T acc[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) acc[l] = x[0];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] = nan_max(acc[l], x[i + l]);
  const int64_t rest = n - i;  // < kLanes
  for (int64_t l = 0; l < rest; ++l) acc[l] = nan_max(acc[l], x[i + l]);
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t l = 0; l < w; ++l) acc[l] = nan_max(acc[l], acc[l + w]);
  return acc[0];
}

/// sum_j a[j] b[j] in double, lanes as sum_row's.
PIPETRAIN_HD inline double dot_row(const float* a, const float* b, int64_t n) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      acc[l] += static_cast<double>(a[i + l]) * static_cast<double>(b[i + l]);
  for (int64_t l = 0; i + l < n; ++l)
    acc[l] += static_cast<double>(a[i + l]) * static_cast<double>(b[i + l]);
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

}  // namespace pipetrain::exec::device
