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

/// max_row for floats, in GCC vector extensions on the host: the scalar-lane
/// form does not vectorise there (the NaN-propagating select defeats the
/// vectoriser). Same lane order, so the same result; a GPU thread runs the
/// scalar form.
PIPETRAIN_HD inline float max_row_f32(const float* x, int64_t n) {
#if defined(__CUDA_ARCH__)
  return max_row(x, n);
#else
  typedef float v8f __attribute__((vector_size(32)));
  auto vmax = [](v8f a, v8f b) -> v8f { return ((a > b) | (a != a)) ? a : b; };
  v8f lo, hi;  // lanes 0..7 and 8..15
  for (int l = 0; l < 8; ++l) lo[l] = hi[l] = x[0];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    v8f u, w;
    __builtin_memcpy(&u, x + i, sizeof(u));
    __builtin_memcpy(&w, x + i + 8, sizeof(w));
    lo = vmax(lo, u);
    hi = vmax(hi, w);
  }
  float acc[kLanes];
  __builtin_memcpy(acc, &lo, sizeof(lo));
  __builtin_memcpy(acc + 8, &hi, sizeof(hi));
  const int64_t rest = n - i;  // < kLanes
  for (int64_t l = 0; l < rest; ++l) acc[l] = nan_max(acc[l], x[i + l]);
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t l = 0; l < w; ++l) acc[l] = nan_max(acc[l], acc[l + w]);
  return acc[0];
#endif
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

/// Folds kLanes partial sums in the fixed tree order.
PIPETRAIN_HD inline double fold_lanes(double* acc) {
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

/// sum of (x[i] - mean)^2 over x[0..n) in double, lanes as sum_row's.
PIPETRAIN_HD inline double sum_sq_dev_row(const float* x, int64_t n, double mean) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      const double d = x[i + l] - mean;
      acc[l] += d * d;
    }
  for (int64_t l = 0; i + l < n; ++l) {
    const double d = x[i + l] - mean;
    acc[l] += d * d;
  }
  return fold_lanes(acc);
}

/// sum of g[i] and of g[i] * (x[i] - mean) over [0..n), with g = dy, or
/// g = dy * scale when scale is given; lanes as sum_row's.
PIPETRAIN_HD inline void add_grad_lane(const float* dy, const float* scale, const float* x,
                                       int64_t i, double mean, double* acc_g, double* acc_gx) {
  const double g = scale ? static_cast<double>(dy[i]) * scale[i] : static_cast<double>(dy[i]);
  *acc_g += g;
  *acc_gx += g * (x[i] - mean);
}

PIPETRAIN_HD inline void sum_grad_row(const float* dy, const float* scale, const float* x,
                                      int64_t n, double mean, double* sum_g, double* sum_gx) {
  double acc_g[kLanes] = {}, acc_gx[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      add_grad_lane(dy, scale, x, i + l, mean, &acc_g[l], &acc_gx[l]);
  for (int64_t l = 0; i + l < n; ++l)
    add_grad_lane(dy, scale, x, i + l, mean, &acc_g[l], &acc_gx[l]);
  *sum_g = fold_lanes(acc_g);
  *sum_gx = fold_lanes(acc_gx);
}

// Sums over (N, C, size) per channel in two levels, so a GPU runs N x C
// threads rather than C: per (n, c) plane a sum in lanes (sum_row's order),
// then per channel the N plane sums in n order.

// The per-plane sums run one thread per (plane, lane): 16 times the threads
// of one per plane, neighbours reading neighbouring elements (one thread per
// plane left most of a GPU idle on uncoalesced reads). Lane l adds exactly
// the elements sum_row's lane l adds, in the same order, and the lanes fold
// in fold_lanes' tree, so the results are bitwise those of the row functions.

/// Per (plane, lane) j: lane j % kLanes of plane j / kLanes, summed.
struct LaneSums {
  const float* x;
  double* out;  // (planes, kLanes)
  int64_t size;
  PIPETRAIN_HD void operator()(int64_t j) const {
    const float* p = x + (j / kLanes) * size;
    double acc = 0;
    for (int64_t e = j % kLanes; e < size; e += kLanes) acc += static_cast<double>(p[e]);
    out[j] = acc;
  }
};

/// Per plane i: its kLanes lane sums folded (the lanes are overwritten).
struct FoldPlaneLanes {
  double* lanes;  // (planes, kLanes)
  double* out;    // (planes)
  PIPETRAIN_HD void operator()(int64_t i) const { out[i] = fold_lanes(lanes + i * kLanes); }
};

/// out[i] = the sum of plane i of x (planes, size), in double: sum_row's result.
template <typename Exec>
void plane_sums(Exec& ex, const float* x, double* out, int64_t planes, int64_t size) {
  double* lanes = ex.template scratch<double>(planes * kLanes);
  ex.for_each(planes * kLanes, LaneSums{x, lanes, size});
  ex.for_each(planes, FoldPlaneLanes{lanes, out});
}

/// Per channel c: sum over n of planes[n][c], in n order, divided by `divisor`.
template <typename Out>
struct ChannelTotal {
  const double* planes;  // (N, C)
  Out* out;              // (C)
  int64_t n_batch, channels;
  double divisor;
  PIPETRAIN_HD void operator()(int64_t c) const {
    double s = 0;
    for (int64_t n = 0; n < n_batch; ++n) s += planes[n * channels + c];
    out[c] = static_cast<Out>(s / divisor);
  }
};

}  // namespace pipetrain::exec::device
