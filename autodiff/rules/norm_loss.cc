// Gradients of the normalisations and the losses: fused gradient ops that
// recompute the statistics from X rather than keeping them alive.
#include "autodiff/grad_builder.h"

namespace pipetrain::autodiff {

namespace {

using ir::Attribute;

// Training mode: BatchNormalizationGrad. Inference mode (frozen statistics) is
// affine per channel: dX = dY k, k = scale / sqrt(var + eps);
// dscale = sum(dY (X - mean)) / sqrt(var + eps), dB = sum(dY), sums over (N, D...).
// Fused with a residual Add and a ReLU (ir/passes/fusion.h), Y = relu(bn(X) +
// R): the ReLU's gradient from Y first, which is also R's.
void batch_norm_grad(GradBuilder& b) {
  const bool relu = b.node().attr_string("activation", "") == "Relu";
  const float eps = b.node().attr_float("epsilon", 1e-5f);
  const bool training = b.node().attr_int("training_mode", 0) != 0;
  const std::string dy = relu ? b.emit1("ReluGrad", {b.GO(0), b.O(0)}) : b.GO(0);
  if (b.has_I(5) && b.wants(5)) b.set_GI(5, dy);
  if (training) {
    auto outs = b.emit("BatchNormalizationGrad", {dy, b.I(0), b.I(1)}, 3,
                       {{"epsilon", Attribute(eps)}}, {!b.wants(0), !b.wants(1), !b.wants(2)});
    for (size_t i = 0; i < 3; ++i)
      if (!outs[i].empty()) b.set_GI(i, outs[i]);
    return;
  }
  const std::string x = b.I(0), scale = b.I(1), mean = b.I(3), var = b.I(4);
  const ir::Shape xs = b.shape(x);
  ir::Shape per_channel(xs.size(), 1);
  per_channel[1] = xs[1];
  std::vector<int64_t> axes = {0};
  for (size_t i = 2; i < xs.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  const Attribute keep(int64_t{0});
  std::string inv_std =
      b.emit1("Reciprocal", {b.emit1("Sqrt", {b.emit1("Add", {var, b.scalar(eps)})})});
  if (b.wants(0)) {
    std::string k = b.reshape(b.emit1("Mul", {scale, inv_std}), per_channel);
    b.set_GI(0, b.emit1("Mul", {dy, k}));
  }
  if (b.wants(1)) {
    std::string centered = b.emit1("Sub", {x, b.reshape(mean, per_channel)});
    std::string s =
        b.emit1("ReduceSum", {b.emit1("Mul", {dy, centered}), b.ints(axes)}, {{"keepdims", keep}});
    b.set_GI(1, b.emit1("Mul", {s, inv_std}));
  }
  if (b.wants(2)) b.set_GI(2, b.emit1("ReduceSum", {dy, b.ints(axes)}, {{"keepdims", keep}}));
  if (b.wants(3) || b.wants(4)) b.unsupported("trainable running statistics");
}

void layer_norm_grad(GradBuilder& b) {
  const ir::Node& n = b.node();
  if (b.has_GO(1) || b.has_GO(2)) b.unsupported("LayerNormalization's Mean/InvStdDev outputs");
  std::map<std::string, Attribute> attrs;
  attrs["axis"] = Attribute(n.attr_int("axis", -1));
  attrs["epsilon"] = Attribute(n.attr_float("epsilon", 1e-5f));
  const bool want_b = b.has_I(2) && b.wants(2);
  auto outs = b.emit("LayerNormalizationGrad", {b.GO(0), b.I(0), b.I(1)}, 3, attrs,
                     {!b.wants(0), !b.wants(1), !want_b});
  for (size_t i = 0; i < 3; ++i)
    if (!outs[i].empty()) b.set_GI(i, outs[i]);
}

// (loss, log_prob?) of (scores, labels, weights?): dscores from dloss only.
void loss_grad(GradBuilder& b, const char* grad_op) {
  if (b.has_GO(1)) b.unsupported("the log_prob output");
  if (!b.has_GO(0)) return;
  std::vector<std::string> in = {b.GO(0), b.I(0), b.I(1)};
  if (b.has_I(2)) in.push_back(b.I(2));
  b.set_GI(0, b.emit1(grad_op, in, b.node().attrs));
}
void softmax_cross_entropy_grad(GradBuilder& b) {
  loss_grad(b, "SoftmaxCrossEntropyLossGrad");
}
void nll_grad(GradBuilder& b) {
  loss_grad(b, "NegativeLogLikelihoodLossGrad");
}

}  // namespace

void register_norm_loss_rules(std::map<std::string, RuleEntry>& r) {
  r["BatchNormalization"] = {batch_norm_grad};
  r["LayerNormalization"] = {layer_norm_grad};
  r["SoftmaxCrossEntropyLoss"] = {softmax_cross_entropy_grad};
  r["NegativeLogLikelihoodLoss"] = {nll_grad};
}

}  // namespace pipetrain::autodiff
