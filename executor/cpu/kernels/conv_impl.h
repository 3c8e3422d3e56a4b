// Conv / ConvTranspose implementations behind kernel_Conv and
// kernel_ConvTranspose: oneDNN (blocked layouts, cached primitives) and a
// plain im2col / col2im + cblas_sgemm path for what oneDNN cannot do.
#pragma once

#include <cstdint>

#include "ir/ops/window.h"
#include "ir/shape.h"

namespace pipetrain::exec::cpu {

struct ConvArgs {
  bool transposed = false;
  int64_t group = 1;
  ir::Shape x;  // (N, C, D...)
  ir::Shape w;  // Conv (M, C / group, k...); ConvTranspose (C, M / group, k...)
  ir::Shape y;  // (N, M, O...)
  ir::WindowGeometry geo;
  const float* x_data = nullptr;  // (N, C, D...)
  const float* w_data = nullptr;  // as w
  const float* b_data = nullptr;  // (M) or nullptr
  float* y_data = nullptr;        // (N, M, O...)
  /// w_data is a graph value: the same bytes on every run until
  /// values_version changes, so its reordered form may be cached.
  bool w_is_value = false;
  uint64_t values_version = 0;
};

/// Runs the convolution with oneDNN; false when oneDNN cannot express it
/// (a negative begin padding), in which case nothing was written.
bool conv_dnnl(const ConvArgs& a);
/// Plain im2col (Conv) / col2im (ConvTranspose) + sgemm; handles everything.
void conv_plain(const ConvArgs& a);

}  // namespace pipetrain::exec::cpu
