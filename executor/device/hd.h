// Code compiled for both the host (g++) and CUDA devices (nvcc): the
// qualifier, float bit casts and a branch-free select usable on both sides.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PIPETRAIN_HD __host__ __device__
#else
#include <bit>
#define PIPETRAIN_HD
#endif

namespace pipetrain::exec::device {

PIPETRAIN_HD inline uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return std::bit_cast<uint32_t>(x);
#endif
}

PIPETRAIN_HD inline float float_of(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return std::bit_cast<float>(b);
#endif
}

/// c ? a : b through bit masks. GCC will not if-convert a float ?: whose arms
/// must be computed (under -ftrapping-math it does not speculate them), which
/// leaves the whole loop scalar; this form vectorises to a blend.
PIPETRAIN_HD inline float select_f32(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return float_of((bits_of(a) & m) | (bits_of(b) & ~m));
}

}  // namespace pipetrain::exec::device
