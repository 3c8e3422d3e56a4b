// The counter-based dropout mask, one rule for every kernel that drops
// (Dropout on the CPU and the devices, the fused Attention and its
// gradient): element i of a run is kept when a hash of (seed, i) clears the
// ratio, so a mask is recomputed from the seed instead of being stored.
#pragma once

#include <cmath>
#include <cstdint>

#include "executor/device/hd.h"

namespace pipetrain::exec::device {

/// splitmix64 finaliser: a bijective 64-bit mix.
PIPETRAIN_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// Keep element i when hash(base, i) >> 40 (a 24-bit uniform) >= thr =
/// ceil(ratio 2^24); kept elements are scaled by 1 / (1 - ratio). The
/// default rule (thr 0, scale 1) keeps everything as it is.
struct DropoutRule {
  uint64_t base = 0, thr = 0;
  float scale = 1.0f;
  PIPETRAIN_HD bool keeps(int64_t i) const {
    return (mix64(base + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ULL) >> 40) >= thr;
  }
};

/// The rule of a run with `seed` dropping `ratio` (>= 1 drops everything).
inline DropoutRule dropout_rule(uint64_t seed, float ratio) {
  DropoutRule r;
  if (ratio <= 0.0f) return r;
  r.base = mix64(seed + 0x9E3779B97F4A7C15ULL);
  r.scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
  const double thr = std::ceil(static_cast<double>(ratio) * 16777216.0);
  r.thr = static_cast<uint64_t>(thr < 16777216.0 ? thr : 16777216.0);
  return r;
}

}  // namespace pipetrain::exec::device
