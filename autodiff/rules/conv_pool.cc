// Gradients of convolution and pooling: fused gradient ops that take the
// forward node's attributes as they are.
#include "autodiff/grad_builder.h"

namespace pipetrain::autodiff {

namespace {

// (dY, X, W) -> (dX, dW, dB); only the wanted outputs are computed.
void conv_like_grad(GradBuilder& b, const char* grad_op, const std::string& dy,
                    std::map<std::string, ir::Attribute> attrs) {
  const bool want_b = b.has_I(2) && b.wants(2);
  auto outs = b.emit(grad_op, {dy, b.I(0), b.I(1)}, 3, std::move(attrs),
                     {!b.wants(0), !b.wants(1), !want_b});
  for (size_t i = 0; i < 3; ++i)
    if (!outs[i].empty()) b.set_GI(i, outs[i]);
}
// A Conv fused with its residual Add and its ReLU (ir/passes/fusion.h),
// Y = relu(conv(X) + R): the ReLU's gradient from Y (Y > 0 where the sum
// was), which is also R's; then the convolution's, as for a plain Conv.
void conv_grad(GradBuilder& b) {
  auto attrs = b.node().attrs;
  std::string ds = b.GO(0);
  if (attrs.erase("activation")) ds = b.emit1("ReluGrad", {ds, b.O(0)});
  if (b.has_I(3) && b.wants(3)) b.set_GI(3, ds);
  conv_like_grad(b, "ConvGrad", ds, std::move(attrs));
}
void conv_transpose_grad(GradBuilder& b) {
  conv_like_grad(b, "ConvTransposeGrad", b.GO(0), b.node().attrs);
}

void max_pool_grad(GradBuilder& b) {
  if (b.has_GO(1)) b.unsupported("MaxPool's Indices output");
  b.set_GI(0, b.emit1("MaxPoolGrad", {b.GO(0), b.I(0)}, b.node().attrs));
}

void average_pool_grad(GradBuilder& b) {
  auto attrs = b.node().attrs;
  attrs["input_shape"] = ir::Attribute(b.shape(b.I(0)));
  b.set_GI(0, b.emit1("AveragePoolGrad", {b.GO(0)}, attrs));
}

// Y (N, C, 1...) = mean over space: dX = expand(dY / (H W ...)).
void global_average_pool_grad(GradBuilder& b) {
  const ir::Shape x = b.shape(b.I(0));
  int64_t space = 1;
  for (size_t i = 2; i < x.size(); ++i) space *= x[i];
  std::string scaled = b.emit1("Mul", {b.GO(0), b.scalar(1.0f / static_cast<float>(space))});
  b.set_GI(0, b.emit1("Expand", {scaled, b.ints(x)}));
}

// RoiAlign (average mode): dX from RoiAlignGrad. The rois' gradient is not
// computed (as in torchvision: box coordinates come from data or a detector).
void roi_align_grad(GradBuilder& b) {
  if (b.node().attr_string("mode", "avg") != "avg") b.unsupported("RoiAlign in max mode");
  if (b.wants(1)) b.unsupported("RoiAlign's rois (only the feature map has a gradient)");
  if (!b.wants(0)) return;
  b.set_GI(0, b.emit1("RoiAlignGrad", {b.GO(0), b.I(0), b.I(1), b.I(2)}, b.node().attrs));
}

}  // namespace

void register_conv_pool_rules(std::map<std::string, RuleEntry>& r) {
  r["Conv"] = {conv_grad};
  r["ConvTranspose"] = {conv_transpose_grad};
  r["MaxPool"] = {max_pool_grad};
  r["AveragePool"] = {average_pool_grad};
  r["GlobalAveragePool"] = {global_average_pool_grad};
  r["RoiAlign"] = {roi_align_grad};
}

}  // namespace pipetrain::autodiff
