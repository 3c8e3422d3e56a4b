// Conv / ConvTranspose implementations behind kernel_Conv and
// kernel_ConvTranspose: oneDNN (blocked layouts, cached primitives) and a
// plain im2col / col2im + cblas_sgemm path for what oneDNN cannot do.
#pragma once

#include <cstdint>
#include <string>

#include "executor/cpu/kernels/window3.h"
#include "ir/node.h"
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
  /// x_data / y_data (ConvGrad: X and dY) are in the blocked layout
  /// (blocked_layout.h), not row-major; Conv and ConvGrad only, 4-D only.
  bool x_blocked = false, y_blocked = false;
  /// Conv with activation "Relu" (ir/passes/fusion.h): max(y, 0) on the way out.
  bool relu = false;
  /// Conv with a residual input (ir/passes/fusion.h): y = conv + sum_data
  /// (before the ReLU), sum_data of y's shape, blocked when sum_blocked.
  const float* sum_data = nullptr;
  bool sum_blocked = false;
  /// oneDNN computes in bf16 (bf16.h): the f32 tensors are converted on the
  /// way in, the outputs come back rounded to bf16. oneDNN paths only.
  bool bf16 = false;
};

/// Runs the convolution with oneDNN (a residual and a ReLU as post-ops);
/// false when oneDNN cannot express it (a negative begin padding), in which
/// case nothing was written.
bool conv_dnnl(const ConvArgs& a);
/// Plain im2col (Conv) / col2im (ConvTranspose) + sgemm; handles everything.
void conv_plain(const ConvArgs& a);

/// ConvGrad / ConvTransposeGrad (grad_conv.cc). `conv` describes the forward
/// (x_data = X, w_data = W, y = dY's shape; b_data and y_data unused); each
/// gradient is computed when its pointer is set.
struct ConvGradArgs {
  ConvArgs conv;
  const float* dy = nullptr;  // (N, M, O...)
  float* dx = nullptr;        // (N, C, D...)
  float* dw = nullptr;        // as W
  float* db = nullptr;        // (M)
  bool dx_blocked = false;    // dx in the blocked layout
};
/// oneDNN's backward primitives; false (nothing written) when oneDNN cannot
/// express the window.
bool conv_grad_dnnl(const ConvGradArgs& g);
/// The adjoint op through conv_plain for dX, im2col + sgemm for dW; handles everything.
void conv_grad_plain(const ConvGradArgs& g);

/// Throws ModelError naming node n unless a.y (dY) is the output of the
/// forward with a.x and a.w (the schema does not relate them; a mismatch would
/// read out of bounds).
void check_conv_grad_shapes(const ir::Node& n, const ConvArgs& a);

/// The forward window seen from the other side: the adjoint op reads dY and
/// writes dX over the same kernel, strides, dilations and begin pads (Conv's
/// adjoint is a ConvTranspose and the other way round).
ir::WindowGeometry adjoint_geometry(const ConvArgs& a);

// Shared by the forward and the gradient kernels (conv_dnnl.cc, conv_plain.cc).

/// The window as oneDNN takes it: dilations count the gaps (d - 1) and
/// ConvTranspose's output_padding is folded into the end pads.
struct DnnlWindow {
  ir::Shape strides, dilates, pad_l, pad_r;
};
/// False when a begin pad is negative, which oneDNN cannot express.
bool dnnl_window(const ConvArgs& a, DnnlWindow* w);
/// oneDNN's view of the ONNX weight bytes as dims and element strides:
/// (OC, IC, k...) or (G, OC/G, IC/G, k...).
void dnnl_weights_view(const ConvArgs& a, ir::Shape* dims, ir::Shape* strides);
/// Primitive cache key of a's shapes and attributes and the oneDNN thread count.
std::string conv_cache_key(const ConvArgs& a);
/// col (channels * K, O): col[(c, k), o] = x[c, o*s + k*d - pb] or 0 outside;
/// x is (channels, I) over g's input sizes.
void im2col(const float* x, int64_t channels, const Window3& g, float* col);

/// Conv and ConvGrad (one group, row-major) as GEMMs over the whole batch,
/// for outputs of a few positions per image where oneDNN's kernels are slow
/// (conv_small_output.cc); false (nothing written) when the case is not one.
bool conv_small_output(const ConvArgs& a);
bool conv_grad_small_output(const ConvGradArgs& g);
/// The case those two take, whatever the layout flags say.
bool small_output_case(const ConvArgs& a);

}  // namespace pipetrain::exec::cpu
