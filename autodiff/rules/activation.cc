// Gradients of the activations, Softmax/LogSoftmax and Dropout: fused
// gradient ops (ir/ops/grad.cc), one pass over memory each.
#include "autodiff/grad_builder.h"

namespace pipetrain::autodiff {

namespace {

using ir::Attribute;

/// Copies the listed attributes of the forward node that it sets.
std::map<std::string, Attribute> copy_attrs(const ir::Node& n, std::vector<std::string> keys) {
  std::map<std::string, Attribute> a;
  for (const auto& k : keys)
    if (n.has_attr(k)) a[k] = n.attrs.at(k);
  return a;
}

void relu_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("ReluGrad", {b.GO(0), b.O(0)}));
}
void leaky_relu_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("LeakyReluGrad", {b.GO(0), b.I(0)}, copy_attrs(b.node(), {"alpha"})));
}
// The exponential family, from the saved output Y where it can: for x <= 0,
// elu' = Y + alpha, selu' = Y + gamma alpha, celu' = Y / alpha + 1.
void elu_grad(GradBuilder& b) {
  const float alpha = b.node().attr_float("alpha", 1.0f);
  const std::string dy = b.GO(0), pos = b.emit1("Greater", {b.I(0), b.scalar(0.0f)});
  const std::string neg = b.emit1("Mul", {dy, b.emit1("Add", {b.O(0), b.scalar(alpha)})});
  b.set_GI(0, b.emit1("Where", {pos, dy, neg}));
}
void selu_grad(GradBuilder& b) {
  const float alpha = b.node().attr_float("alpha", 1.67326319217681884765625f);
  const float gamma = b.node().attr_float("gamma", 1.05070102214813232421875f);
  const std::string dy = b.GO(0), pos = b.emit1("Greater", {b.I(0), b.scalar(0.0f)});
  const std::string neg = b.emit1("Mul", {dy, b.emit1("Add", {b.O(0), b.scalar(gamma * alpha)})});
  b.set_GI(0, b.emit1("Where", {pos, b.emit1("Mul", {dy, b.scalar(gamma)}), neg}));
}
void celu_grad(GradBuilder& b) {
  const float alpha = b.node().attr_float("alpha", 1.0f);
  const std::string dy = b.GO(0), pos = b.emit1("Greater", {b.I(0), b.scalar(0.0f)});
  const std::string slope =
      b.emit1("Add", {b.emit1("Mul", {b.O(0), b.scalar(1.0f / alpha)}), b.scalar(1.0f)});
  b.set_GI(0, b.emit1("Where", {pos, dy, b.emit1("Mul", {dy, slope})}));
}
void thresholded_relu_grad(GradBuilder& b) {
  const float alpha = b.node().attr_float("alpha", 1.0f);
  const std::string pos = b.emit1("Greater", {b.I(0), b.scalar(alpha)});
  b.set_GI(0, b.emit1("Where", {pos, b.GO(0), b.scalar(0.0f)}));
}
// softplus' = sigmoid(x).
void softplus_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("Mul", {b.GO(0), b.emit1("Sigmoid", {b.I(0)})}));
}
// softsign' = 1 / (1 + |x|)^2.
void softsign_grad(GradBuilder& b) {
  const std::string d = b.emit1("Add", {b.emit1("Abs", {b.I(0)}), b.scalar(1.0f)});
  b.set_GI(0, b.emit1("Div", {b.GO(0), b.emit1("Mul", {d, d})}));
}
// mish' = t + x (1 - t^2) sigmoid(x), t = tanh(softplus(x)).
void mish_grad(GradBuilder& b) {
  const std::string x = b.I(0);
  const std::string t = b.emit1("Tanh", {b.emit1("Softplus", {x})});
  const std::string sech2 = b.emit1("Sub", {b.scalar(1.0f), b.emit1("Mul", {t, t})});
  const std::string rest = b.emit1("Mul", {b.emit1("Mul", {x, sech2}), b.emit1("Sigmoid", {x})});
  b.set_GI(0, b.emit1("Mul", {b.GO(0), b.emit1("Add", {t, rest})}));
}
void hard_sigmoid_grad(GradBuilder& b) {
  b.set_GI(0,
           b.emit1("HardSigmoidGrad", {b.GO(0), b.I(0)}, copy_attrs(b.node(), {"alpha", "beta"})));
}
void hard_swish_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("HardSwishGrad", {b.GO(0), b.I(0)}));
}
void sigmoid_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("SigmoidGrad", {b.GO(0), b.O(0)}));
}
void tanh_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("TanhGrad", {b.GO(0), b.O(0)}));
}
void gelu_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("GeluGrad", {b.GO(0), b.I(0)}, copy_attrs(b.node(), {"approximate"})));
}
// Clip(X, min, max): the bounds get no gradient.
void clip_grad(GradBuilder& b) {
  std::vector<std::string> in = {b.GO(0), b.I(0)};
  in.push_back(b.has_I(1) ? b.I(1) : "");
  in.push_back(b.has_I(2) ? b.I(2) : "");
  b.set_GI(0, b.emit1("ClipGrad", in));
}
void softmax_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("SoftmaxGrad", {b.GO(0), b.O(0)}, copy_attrs(b.node(), {"axis"})));
}
void log_softmax_grad(GradBuilder& b) {
  b.set_GI(0, b.emit1("LogSoftmaxGrad", {b.GO(0), b.O(0)}, copy_attrs(b.node(), {"axis"})));
}

// Dropout reuses the forward mask (its optional output 1, added when absent):
// dX = dY * mask / (1 - ratio). A constant training_mode = false makes it an identity.
void dropout_grad(GradBuilder& b) {
  if (b.has_I(2)) {
    const ir::Tensor* mode = b.value(b.I(2));
    if (!mode) b.unsupported("Dropout with a training_mode input that is not a constant");
    if (mode->at(0) == 0) {
      b.set_GI(0, b.GO(0));
      return;
    }
  }
  std::string ratio = b.has_I(1) ? b.I(1) : "";
  if (ratio.empty() && b.node().has_attr("ratio"))  // opset < 12 keeps it as an attribute
    ratio = b.scalar(b.node().attr_float("ratio", 0.5f));
  std::string mask = b.ensure_output(1, "mask");
  b.set_GI(0, b.emit1("DropoutGrad", {b.GO(0), mask, ratio}));
}

// PRelu: dX = dY (slope where X < 0, else 1); dslope = dY X where X < 0,
// summed back to the slope's shape.
void prelu_grad(GradBuilder& b) {
  const std::string x = b.I(0), slope = b.I(1), zero = b.scalar(0.0f);
  const std::string neg = b.emit1("Less", {x, zero});
  if (b.wants(0)) b.set_GI(0, b.emit1("Where", {neg, b.emit1("Mul", {b.GO(0), slope}), b.GO(0)}));
  if (b.wants(1)) {
    std::string t = b.emit1("Where", {neg, b.emit1("Mul", {b.GO(0), x}), zero});
    b.set_GI(1, b.reduce_to(t, b.shape(slope)));
  }
}

// Shrink: dX = dY where |X| > lambd, else 0.
void shrink_grad(GradBuilder& b) {
  const std::string x = b.I(0);
  const float lambd = b.node().attr_float("lambd", 0.5f);
  std::string outside = b.emit1("Greater", {b.emit1("Abs", {x}), b.scalar(lambd)});
  b.set_GI(0, b.emit1("Where", {outside, b.GO(0), b.scalar(0.0f)}));
}

}  // namespace

void register_activation_rules(std::map<std::string, RuleEntry>& r) {
  r["PRelu"] = {prelu_grad};
  r["Shrink"] = {shrink_grad};
  r["Relu"] = {relu_grad};
  r["LeakyRelu"] = {leaky_relu_grad};
  r["HardSigmoid"] = {hard_sigmoid_grad};
  r["Elu"] = {elu_grad};
  r["Selu"] = {selu_grad};
  r["Celu"] = {celu_grad};
  r["ThresholdedRelu"] = {thresholded_relu_grad};
  r["Softplus"] = {softplus_grad};
  r["Softsign"] = {softsign_grad};
  r["Mish"] = {mish_grad};
  r["HardSwish"] = {hard_swish_grad};
  r["Sigmoid"] = {sigmoid_grad};
  r["Tanh"] = {tanh_grad};
  r["Gelu"] = {gelu_grad};
  r["Clip"] = {clip_grad};
  r["Softmax"] = {softmax_grad};
  r["LogSoftmax"] = {log_softmax_grad};
  r["Dropout"] = {dropout_grad};
}

}  // namespace pipetrain::autodiff
