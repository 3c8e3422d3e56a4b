// The per-element math of the elementwise ops, activations and their
// gradients, written once: the CPU kernels (executor/cpu/kernels) and the
// CUDA kernels (executor/cuda) call these same functors, so the CPU tests
// check the arithmetic the GPU runs. Integer arithmetic wraps instead of
// overflowing; max/min propagate NaN like numpy.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "executor/device/hd.h"
#include "executor/device/math_f32.h"

namespace pipetrain::exec::device {

// --- helpers -------------------------------------------------------------

/// Integer + - * that wrap instead of overflowing (signed overflow is UB).
template <typename T>
PIPETRAIN_HD T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) +
                          static_cast<std::make_unsigned_t<T>>(b));
  else
    return a + b;
}
template <typename T>
PIPETRAIN_HD T wrap_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) -
                          static_cast<std::make_unsigned_t<T>>(b));
  else
    return a - b;
}
template <typename T>
PIPETRAIN_HD T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) *
                          static_cast<std::make_unsigned_t<T>>(b));
  else
    return a * b;
}

/// max/min that propagate NaN like numpy's maximum/minimum.
template <typename T>
PIPETRAIN_HD T nan_max(T a, T b) {
  if constexpr (std::is_same_v<T, float>)
    return select_f32((a > b) | (a != a), a, b);
  else
    return (a > b || a != a) ? a : b;
}
template <typename T>
PIPETRAIN_HD T nan_min(T a, T b) {
  if constexpr (std::is_same_v<T, float>)
    return select_f32((a < b) | (a != a), a, b);
  else
    return (a < b || a != a) ? a : b;
}

/// Float to integer, truncating towards zero and saturating (NaN gives 0);
/// a plain static_cast is undefined out of range.
template <typename T>
PIPETRAIN_HD T float_to_int(double v) {
  if (!(v == v)) return 0;
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  return static_cast<T>(v);
}

/// a^e for integers by squaring; negative exponents truncate 1 / a^|e|.
template <typename T, typename E>
PIPETRAIN_HD T int_pow(T a, E e) {
  if (e < 0) {
    if (a == 1) return 1;
    if (a == -1) return (e % 2) ? -1 : 1;
    return 0;
  }
  T r = 1;
  while (e > 0) {
    if (e & 1) r = wrap_mul(r, a);
    a = wrap_mul(a, a);
    e >>= 1;
  }
  return r;
}

/// a^b: f32^f32 in f32; mixed float/integer powers in double, converted once.
template <typename T, typename E>
PIPETRAIN_HD T pow_value(T a, E b) {
  if constexpr (std::is_floating_point_v<T> && std::is_floating_point_v<E>) {
    return ::powf(a, b);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(::pow(static_cast<double>(a), static_cast<double>(b)));
  } else if constexpr (std::is_integral_v<E>) {
    return int_pow(a, b);
  } else {
    return float_to_int<T>(::pow(static_cast<double>(a), static_cast<double>(b)));
  }
}

// --- binary ops: T op(T, T) ----------------------------------------------

struct AddOp {
  template <typename T>
  PIPETRAIN_HD T operator()(T a, T b) const {
    return wrap_add(a, b);
  }
};
struct SubOp {
  template <typename T>
  PIPETRAIN_HD T operator()(T a, T b) const {
    return wrap_sub(a, b);
  }
};
struct MulOp {
  template <typename T>
  PIPETRAIN_HD T operator()(T a, T b) const {
    return wrap_mul(a, b);
  }
};
/// Integer division truncates towards zero like C; x / 0 gives 0 and
/// x / -1 wraps instead of trapping.
struct DivOp {
  template <typename T>
  PIPETRAIN_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return 0;
      if (b == -1) return wrap_sub(T{0}, a);
    }
    return a / b;
  }
};
struct MaxOp {
  template <typename T>
  PIPETRAIN_HD T operator()(T a, T b) const {
    return nan_max(a, b);
  }
};
struct MinOp {
  template <typename T>
  PIPETRAIN_HD T operator()(T a, T b) const {
    return nan_min(a, b);
  }
};
struct EqualOp {
  template <typename T>
  PIPETRAIN_HD uint8_t operator()(T a, T b) const {
    return a == b;
  }
};
struct LessOp {
  template <typename T>
  PIPETRAIN_HD uint8_t operator()(T a, T b) const {
    return a < b;
  }
};
struct GreaterOp {
  template <typename T>
  PIPETRAIN_HD uint8_t operator()(T a, T b) const {
    return a > b;
  }
};
struct GreaterOrEqualOp {
  template <typename T>
  PIPETRAIN_HD uint8_t operator()(T a, T b) const {
    return a >= b;
  }
};
struct LessOrEqualOp {
  template <typename T>
  PIPETRAIN_HD uint8_t operator()(T a, T b) const {
    return a <= b;
  }
};
struct PowOp {
  template <typename T, typename E>
  PIPETRAIN_HD T operator()(T a, E b) const {
    return pow_value(a, b);
  }
};

/// Mod: fmod = 1 takes the dividend's sign (C's %, fmodf), fmod = 0 the
/// divisor's (Python's %). Integer x mod 0 gives 0 and x mod -1 gives 0
/// instead of trapping.
struct ModOp {
  bool fmod = false;
  template <typename T>
  PIPETRAIN_HD T operator()(T a, T b) const {
    T r;
    if constexpr (std::is_integral_v<T>) {
      if (b == 0 || b == -1) return 0;
      r = a % b;
    } else {
      r = ::fmodf(a, b);
    }
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
};
/// PRelu: x where x >= 0, slope x below (NaN stays NaN).
struct PReluOp {
  template <typename T>
  PIPETRAIN_HD T operator()(T x, T slope) const {
    return x < 0 ? wrap_mul(slope, x) : x;
  }
};
/// Logical ops on bool (stored as uint8_t; any non-zero byte is true).
struct AndOp {
  template <typename T>
  PIPETRAIN_HD uint8_t operator()(T a, T b) const {
    return a != 0 && b != 0;
  }
};
struct OrOp {
  template <typename T>
  PIPETRAIN_HD uint8_t operator()(T a, T b) const {
    return a != 0 || b != 0;
  }
};
struct XorOp {
  template <typename T>
  PIPETRAIN_HD uint8_t operator()(T a, T b) const {
    return (a != 0) != (b != 0);
  }
};

// --- unary ops -----------------------------------------------------------

struct SqrtFn {
  PIPETRAIN_HD float operator()(float v) const { return ::sqrtf(v); }
};
struct ExpFn {
  PIPETRAIN_HD float operator()(float v) const { return exp_f32(v); }
};
struct LogFn {
  PIPETRAIN_HD float operator()(float v) const { return ::logf(v); }
};
struct ReciprocalFn {
  PIPETRAIN_HD float operator()(float v) const { return 1.0f / v; }
};
struct ErfFn {
  PIPETRAIN_HD float operator()(float v) const { return erf_f32(v); }
};
struct NegFn {
  template <typename T>
  PIPETRAIN_HD T operator()(T v) const {
    return wrap_sub(T{0}, v);
  }
};
struct AbsFn {
  template <typename T>
  PIPETRAIN_HD T operator()(T v) const {
    if constexpr (std::is_floating_point_v<T>)
      return ::fabsf(v);
    else
      return v < 0 ? wrap_sub(T{0}, v) : v;
  }
};
struct NotFn {
  PIPETRAIN_HD uint8_t operator()(uint8_t v) const { return v == 0; }
};

// --- activations ---------------------------------------------------------

/// relu(x) = max(x, 0); NaN stays NaN.
struct ReluFn {
  template <typename T>
  PIPETRAIN_HD T operator()(T v) const {
    return v < T{0} ? T{0} : v;
  }
};
/// leaky_relu(x) = x < 0 ? alpha x : x.
struct LeakyReluFn {
  float alpha;
  PIPETRAIN_HD float operator()(float v) const { return select_f32(v < 0.0f, alpha * v, v); }
};
/// elu(x) = x > 0 ? x : alpha (e^x - 1).
struct EluFn {
  float alpha;
  PIPETRAIN_HD float operator()(float v) const {
    return select_f32(v > 0.0f, v, alpha * ::expm1f(select_f32(v > 0.0f, 0.0f, v)));
  }
};
/// selu(x) = gamma (x > 0 ? x : alpha (e^x - 1)).
struct SeluFn {
  float alpha, gamma;
  PIPETRAIN_HD float operator()(float v) const {
    return gamma * select_f32(v > 0.0f, v, alpha * ::expm1f(select_f32(v > 0.0f, 0.0f, v)));
  }
};
/// celu(x) = max(0, x) + min(0, alpha (e^(x / alpha) - 1)).
struct CeluFn {
  float alpha;
  PIPETRAIN_HD float operator()(float v) const {
    return select_f32(v > 0.0f, v, alpha * ::expm1f(select_f32(v > 0.0f, 0.0f, v) / alpha));
  }
};
/// thresholded_relu(x) = x > alpha ? x : 0.
struct ThresholdedReluFn {
  float alpha;
  PIPETRAIN_HD float operator()(float v) const { return select_f32(v > alpha, v, 0.0f); }
};
/// softplus(x) = log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow.
struct SoftplusFn {
  PIPETRAIN_HD float operator()(float v) const {
    return select_f32(v > 0.0f, v, 0.0f) + ::log1pf(exp_f32(-::fabsf(v)));
  }
};
/// softsign(x) = x / (1 + |x|).
struct SoftsignFn {
  PIPETRAIN_HD float operator()(float v) const { return v / (1.0f + ::fabsf(v)); }
};
/// mish(x) = x tanh(softplus(x)).
struct MishFn {
  PIPETRAIN_HD float operator()(float v) const { return v * tanh_f32(SoftplusFn{}(v)); }
};
struct SinFn {
  PIPETRAIN_HD float operator()(float v) const { return ::sinf(v); }
};
struct CosFn {
  PIPETRAIN_HD float operator()(float v) const { return ::cosf(v); }
};
struct TanFn {
  PIPETRAIN_HD float operator()(float v) const { return ::tanf(v); }
};
struct AsinFn {
  PIPETRAIN_HD float operator()(float v) const { return ::asinf(v); }
};
struct AcosFn {
  PIPETRAIN_HD float operator()(float v) const { return ::acosf(v); }
};
struct AtanFn {
  PIPETRAIN_HD float operator()(float v) const { return ::atanf(v); }
};
struct SinhFn {
  PIPETRAIN_HD float operator()(float v) const { return ::sinhf(v); }
};
struct CoshFn {
  PIPETRAIN_HD float operator()(float v) const { return ::coshf(v); }
};
struct AsinhFn {
  PIPETRAIN_HD float operator()(float v) const { return ::asinhf(v); }
};
struct AcoshFn {
  PIPETRAIN_HD float operator()(float v) const { return ::acoshf(v); }
};
struct AtanhFn {
  PIPETRAIN_HD float operator()(float v) const { return ::atanhf(v); }
};
/// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
struct ShrinkFn {
  float lambd, bias;
  PIPETRAIN_HD float operator()(float v) const {
    return select_f32(v < -lambd, v + bias, select_f32(v > lambd, v - bias, 0.0f));
  }
};
struct IsNaNFn {
  PIPETRAIN_HD uint8_t operator()(float v) const { return v != v; }
};
/// Infinities of the signs asked for (IsInf's detect_negative / detect_positive).
struct IsInfFn {
  bool negative = true, positive = true;
  PIPETRAIN_HD uint8_t operator()(float v) const {
    return ::fabsf(v) > 3.40282347e38f && (v > 0.0f ? positive : negative);  // > FLT_MAX: infinite
  }
};
struct FloorFn {
  PIPETRAIN_HD float operator()(float v) const { return ::floorf(v); }
};
struct CeilFn {
  PIPETRAIN_HD float operator()(float v) const { return ::ceilf(v); }
};
/// Halves to even (the default rounding mode), as ONNX's Round.
struct RoundFn {
  PIPETRAIN_HD float operator()(float v) const { return ::nearbyintf(v); }
};
/// -1, 0 or 1; NaN stays NaN.
struct SignFn {
  PIPETRAIN_HD float operator()(float v) const {
    return select_f32(v > 0.0f, 1.0f, select_f32(v < 0.0f, -1.0f, v * 0.0f));
  }
};
/// hard_sigmoid(x) = max(0, min(1, alpha x + beta)); NaN stays NaN.
struct HardSigmoidFn {
  float alpha, beta;
  PIPETRAIN_HD float operator()(float v) const {
    const float s = alpha * v + beta;
    return select_f32(s < 0.0f, 0.0f, select_f32(s > 1.0f, 1.0f, s));
  }
};
/// hard_swish(x) = x relu6(x + 3) / 6, PyTorch's form (ONNX writes the same
/// function as x max(0, min(1, x / 6 + 1/2))).
struct HardSwishFn {
  PIPETRAIN_HD float operator()(float v) const {
    const float s = v + 3.0f;
    return v * select_f32(s < 0.0f, 0.0f, select_f32(s > 6.0f, 6.0f, s)) / 6.0f;
  }
};
/// sigmoid(x) = 1 / (1 + e^-x), written as e^x / (1 + e^x) for x < 0 so
/// that exp never overflows.
struct SigmoidFn {
  PIPETRAIN_HD float operator()(float v) const {
    const float e = exp_f32(-::fabsf(v));  // e^-|v| in (0, 1]
    const float s = 1.0f / (1.0f + e);
    return select_f32(v >= 0.0f, s, e * s);
  }
};
struct TanhFn {
  PIPETRAIN_HD float operator()(float v) const { return tanh_f32(v); }
};

inline constexpr float kSqrt1_2 = 0.707106781186547524401f;      // 1 / sqrt 2
inline constexpr float kSqrt2OverPi = 0.797884560802865355880f;  // sqrt(2 / pi)
inline constexpr float kInvSqrt2Pi = 0.398942280401432677940f;   // 1 / sqrt(2 pi)
inline constexpr float kGeluCubic = 0.044715f;

/// gelu(x) = x/2 (1 + erf(x / sqrt 2)), as PyTorch computes it. erf_f32 is a
/// rational without exp: 2.3x faster than the erfc form (0.5 x erfc(-x /
/// sqrt 2)) over 8 lanes, at an absolute error under 1e-6; what it gives up
/// is relative accuracy where gelu(x) < 1e-5 (x < -4.3), as PyTorch's does.
struct GeluFn {
  PIPETRAIN_HD float operator()(float v) const { return 0.5f * v * (1.0f + erf_f32(v * kSqrt1_2)); }
};
/// approximate = "tanh": x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluTanhFn {
  PIPETRAIN_HD float operator()(float v) const {
    return 0.5f * v * (1.0f + tanh_f32(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
  }
};
/// clip(x) = min(max(x, lo), hi); min > max gives max everywhere, as ONNX
/// specifies; NaN stays NaN.
template <typename T>
struct ClipFn {
  T lo, hi;
  PIPETRAIN_HD T operator()(T x) const {
    const T v = x < lo ? lo : x;
    return v > hi ? hi : v;
  }
};

// --- activation gradients: dx = fn(dy, t), t the saved X or Y ------------
// The select_f32 forms keep a 0 (not 0 * dy, NaN for an infinite dy) where
// the gradient is cut, as PyTorch's threshold_backward does.

/// dX = dY * (Y > 0).
struct ReluGradFn {
  PIPETRAIN_HD float operator()(float dy, float y) const { return select_f32(y > 0.0f, dy, 0.0f); }
};
/// dX = dY * (X > 0 ? 1 : alpha); at X = 0 the slope is alpha, as in PyTorch.
struct LeakyReluGradFn {
  float alpha;
  PIPETRAIN_HD float operator()(float dy, float x) const {
    return select_f32(x > 0.0f, dy, alpha * dy);
  }
};
/// dX = dY alpha inside (0 < alpha X + beta < 1), 0 outside (PyTorch's
/// hardsigmoid_backward: strict bounds, so the kinks get 0).
struct HardSigmoidGradFn {
  float alpha, beta;
  PIPETRAIN_HD float operator()(float dy, float x) const {
    const float s = alpha * x + beta;
    return select_f32(s > 0.0f && s < 1.0f, alpha * dy, 0.0f);
  }
};
/// As PyTorch's hardswish_backward: 0 below -3, dY (X / 3 + 1/2) on [-3, 3], dY above.
struct HardSwishGradFn {
  PIPETRAIN_HD float operator()(float dy, float x) const {
    return select_f32(x < -3.0f, 0.0f, select_f32(x <= 3.0f, dy * (x / 3.0f + 0.5f), dy));
  }
};
/// sigma' = sigma (1 - sigma): dX = dY * Y * (1 - Y).
struct SigmoidGradFn {
  PIPETRAIN_HD float operator()(float dy, float y) const { return dy * y * (1.0f - y); }
};
/// tanh' = 1 - tanh^2: dX = dY * (1 - Y^2).
struct TanhGradFn {
  PIPETRAIN_HD float operator()(float dy, float y) const { return dy * (1.0f - y * y); }
};
/// gelu(x) = x Phi(x): gelu' = Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
/// (erf, as GeluFn: 1.7x faster than erfc), phi(x) = e^(-x^2 / 2) / sqrt(2 pi).
struct GeluGradFn {
  PIPETRAIN_HD float operator()(float dy, float x) const {
    const float cdf = 0.5f * (1.0f + erf_f32(x * kSqrt1_2));
    const float pdf = kInvSqrt2Pi * exp_f32(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  }
};
/// approximate = "tanh": gelu(x) = x/2 (1 + t), t = tanh(u), u = k (x + c x^3):
/// gelu' = (1 + t) / 2 + x/2 (1 - t^2) k (1 + 3 c x^2).
struct GeluTanhGradFn {
  PIPETRAIN_HD float operator()(float dy, float x) const {
    const float x2 = x * x;
    const float t = tanh_f32(kSqrt2OverPi * x * (1.0f + kGeluCubic * x2));
    return dy * (0.5f * (1.0f + t) +
                 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x2));
  }
};
/// dX = dY where lo <= X <= hi (bounds included, as PyTorch's clamp backward), else 0.
struct ClipGradFn {
  float lo, hi;
  PIPETRAIN_HD float operator()(float dy, float x) const {
    return select_f32((x >= lo) & (x <= hi), dy, 0.0f);
  }
};
/// dX = dY * mask * scale, scale = 1 / (1 - ratio) (0 when nothing was kept).
struct DropoutGradFn {
  float scale;
  PIPETRAIN_HD float operator()(float dy, uint8_t keep) const {
    return select_f32(keep != 0, dy * scale, 0.0f);
  }
};

}  // namespace pipetrain::exec::device
