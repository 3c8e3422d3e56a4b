// bf16 mixed precision for the device backends, as autocast does it: the ops
// that do the heavy arithmetic (GEMMs, convolutions, LSTMs) see their float
// inputs rounded to bf16, accumulate in fp32 (a product of two bf16 values is
// exact in fp32) and round their float outputs to bf16; every other op
// computes in fp32 on what arrives. The weights themselves stay fp32 (the
// optimizer's master copy): only the copy an op reads is rounded.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "executor/device/hd.h"

namespace pipetrain::exec::device {

/// x rounded to the nearest bf16 (ties to even), as a float; NaN stays NaN.
PIPETRAIN_HD inline float round_bf16(float x) {
  const uint32_t b = bits_of(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return x;
  const uint32_t rounding = 0x7fffu + ((b >> 16) & 1u);
  return float_of((b + rounding) & 0xffff0000u);
}

struct RoundBf16 {
  float* x;
  PIPETRAIN_HD void operator()(int64_t i) const { x[i] = round_bf16(x[i]); }
};

/// dst = src rounded (the op's copy of an input that stays fp32).
struct RoundedBf16Copy {
  const float* src;
  float* dst;
  PIPETRAIN_HD void operator()(int64_t i) const { dst[i] = round_bf16(src[i]); }
};

/// The ops that compute in bf16 under --precision bf16.
inline const std::set<std::string>& bf16_ops() {
  static const std::set<std::string> ops = {"Gemm",          "MatMul",   "Conv",
                                            "ConvTranspose", "ConvGrad", "ConvTransposeGrad",
                                            "LSTM",          "LSTMGrad"};
  return ops;
}

}  // namespace pipetrain::exec::device
