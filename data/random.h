// Seeded randomness written out, so that results depend only on the seed and
// std::mt19937_64 (whose output the standard fixes), never on the standard
// library's distributions (whose algorithms it does not).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace pipetrain::data {

/// Uniform integer in [0, bound) by rejection (no modulo bias).
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  const uint64_t limit = max - max % bound;  // largest multiple of bound <= max
  uint64_t x;
  do {
    x = rng();
  } while (x >= limit);
  return x % bound;
}

/// Uniform double in [0, 1) from the top 53 bits.
inline double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

/// Standard normal by Box-Muller (one value per call; the second is discarded for simplicity).
inline double standard_normal(std::mt19937_64& rng) {
  const double u1 = 1.0 - uniform01(rng);  // (0, 1]: log stays finite
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

/// Fisher-Yates: for i = n-1 .. 1, swap v[i] with v[j], j uniform in [0, i].
template <typename T>
void fisher_yates(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(uniform_below(rng, i));
    std::swap(v[i - 1], v[j]);
  }
}

/// The permutation of 0..n-1 for one seed.
inline std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  std::mt19937_64 rng(seed);
  fisher_yates(v, rng);
  return v;
}

}  // namespace pipetrain::data
