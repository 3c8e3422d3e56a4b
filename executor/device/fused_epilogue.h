// What a node fused with the residual Add and the ReLU after it
// (ir/passes/fusion.h: a Conv's input 3, a BatchNormalization's input 5)
// does once its own output is written, on any Exec.
#pragma once

#include "executor/device/elementwise_math.h"

namespace pipetrain::exec::device {

/// The fused ReLU (activation "Relu"), over the output in place.
struct ReluInPlace {
  float* y;
  PIPETRAIN_HD void operator()(int64_t i) const { y[i] = ReluFn{}(y[i]); }
};

/// The fused residual, added to the output in place.
struct AddInPlace {
  float* y;
  const float* r;
  PIPETRAIN_HD void operator()(int64_t i) const { y[i] += r[i]; }
};

/// y += residual (when given), then the ReLU (when `n` has activation
/// "Relu"), in that order, as the unfused Add and Relu would.
template <typename Exec>
void fused_epilogue(Exec& ex, const ir::Node& n, float* y, const float* residual, int64_t count) {
  if (residual) ex.for_each(count, AddInPlace{y, residual});
  if (n.attr_string("activation", "") == "Relu") ex.for_each(count, ReluInPlace{y});
}

}  // namespace pipetrain::exec::device
