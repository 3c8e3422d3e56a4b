// exp, tanh, erfc and erf for f32 written in plain arithmetic, so loops calling them
// vectorise (libm's expf/tanhf are scalar calls without -ffast-math) and CUDA
// kernels compute bitwise what the CPU computes. Both stay within a few ulp of
// libm; tests/executor/vec_math_test.cc sweeps the ranges.
#pragma once

#include <cmath>
#include <cstdint>

#include "executor/device/hd.h"

namespace pipetrain::exec::device {

/// e^x. x = k ln2 + r with |r| <= ln2 / 2; e^r = 1 + r + r^2 p(r) with the
/// Cephes expf polynomial; 2^k is applied as 2^(k/2) 2^(k - k/2) so that both
/// factors stay normal from subnormal results up to overflow (which gives inf).
/// NaN propagates.
PIPETRAIN_HD inline float exp_f32(float x) {
  const bool nan = x != x;
  float xc = x < -104.0f ? -104.0f : x;  // e^-104 is below the smallest subnormal
  xc = xc > 88.8f ? 88.8f : xc;          // e^88.8 overflows to inf
  xc = select_f32(nan, 0.0f, xc);
  // k = round(x / ln2), half away from zero (a truncating conversion
  // vectorises; std::floor does not without -fno-trapping-math).
  const int32_t ki = static_cast<int32_t>(xc * 1.44269504088896341f + ::copysignf(0.5f, xc));
  const float k = static_cast<float>(ki);
  const float r = (xc - k * 0.693359375f) - k * -2.12194440e-4f;  // ln2 split hi + lo
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t k1 = ki >> 1;  // floor(k / 2)
  const int32_t k2 = ki - k1;
  const float s1 = float_of(static_cast<uint32_t>((k1 + 127) << 23));
  const float s2 = float_of(static_cast<uint32_t>((k2 + 127) << 23));
  const float y = p * s1 * s2;
  return select_f32(nan, x, y);
}

/// e^x, but 0 where that is subnormal (x < -87.33): no subnormal operand
/// anywhere in the evaluation, which on x86 costs a microcode assist per
/// element (a causal mask's -1e9 scores made softmax rows 10x slower).
PIPETRAIN_HD inline float exp_f32_normal(float x) {
  const bool tiny = x < -87.33f;  // e^-87.33 ~ 1.18e-38, the smallest normal
  return select_f32(tiny, 0.0f, exp_f32(tiny ? 0.0f : x));
}

/// tanh x. |x| < 0.625: x + x^3 q(x^2), q a least-squares fit (< 1 ulp);
/// otherwise sign(x) (1 - 2 / (e^(2|x|) + 1)), which has no cancellation there.
PIPETRAIN_HD inline float tanh_f32(float x) {
  const float a = ::fabsf(x);
  const float t = x * x;
  float q = -0.005731194745749235f;
  q = q * t + 0.020664723590016365f;
  q = q * t - 0.053748443722724915f;
  q = q * t + 0.13331560790538788f;
  q = q * t - 0.3333328664302826f;
  const float small = x + x * t * q;
  const float big = ::copysignf(1.0f - 2.0f / (exp_f32(2.0f * a) + 1.0f), x);
  return select_f32(a < 0.625f, small, big);
}

/// erfc x = t e^(-z^2 + c(t)), z = |x|, t = 1 / (1 + z / 2), c the Chebyshev
/// fit of Numerical Recipes' erfcc (fractional error 1.2e-7); erfc(-z) = 2 -
/// erfc(z). In f32 the relative error is ~2e-6 for |x| < 4, growing with x^2
/// (the rounding of z^2) where erfc itself is below 1e-8.
PIPETRAIN_HD inline float erfc_f32(float x) {
  const float z = ::fabsf(x);
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  const float r = t * exp_f32(-z * z - 1.26551223f + t * p);
  return select_f32(x >= 0.0f, r, 2.0f - r);
}

/// erf x = x P(x^2) / Q(x^2) for |x| < 3.93, +-1 beyond (erfc 3.93 < 2^-25:
/// erf rounds to 1 in f32): a (7, 5)-term rational fitted to the relative error
/// (Loeb iteration, as Eigen's fast erf). < 7 ulp in f32 arithmetic, one
/// division and no exp, so it vectorises to a few dozen instructions per 8
/// lanes. NaN propagates.
PIPETRAIN_HD inline float erf_f32(float x) {
  float c = select_f32(x > 3.93f, 3.93f, x);
  c = select_f32(c < -3.93f, -3.93f, c);
  const float t = c * c;
  float p = 2.0580028348149426e-08f;
  p = p * t - 1.9669666926347418e-06f;
  p = p * t + 1.3680134725291282e-04f;
  p = p * t + 3.4428450744599104e-03f;
  p = p * t + 4.9725547432899475e-02f;
  p = p * t + 0.19353197515010834f;
  p = p * t + 1.1283791065216064f;
  float q = 8.971701608970761e-04f;
  q = q * t + 1.3813688419759274e-02f;
  q = q * t + 0.1123567521572113f;
  q = q * t + 0.5048453211784363f;
  q = q * t + 1.0f;
  // !(|x| >= ..) rather than |x| < ..: NaN takes the rational arm and propagates.
  return select_f32(!(::fabsf(x) >= 3.93f), c * p / q, ::copysignf(1.0f, x));
}

}  // namespace pipetrain::exec::device
