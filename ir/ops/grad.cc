// Schemas of the gradient ops autodiff emits (autodiff/rules/*.cc). They are
// internal: a model file that names one is refused by the importer. Each
// output has the shape of the forward tensor whose gradient it is; absent
// outputs ("") are gradients nobody needs and are not computed.
#include <string>

#include "ir/op_registry.h"

namespace pipetrain::ir {

namespace {

OpSchema grad_schema(int min_in, int max_in, int max_out, std::vector<AttrSpec> attrs,
                     std::function<void(InferContext&)> infer) {
  OpSchema s;
  s.min_inputs = min_in;
  s.max_inputs = max_in;
  s.min_outputs = 1;
  s.max_outputs = max_out;
  s.attrs = std::move(attrs);
  s.infer = std::move(infer);
  s.differentiable = false;  // no double backward
  s.internal = true;
  return s;
}

void check_same(InferContext& c, size_t a, size_t b) {
  if (c.shape(a) != c.shape(b))
    c.fail("gradient " + shape_str(c.shape(a)) + " does not match the forward tensor " +
           shape_str(c.shape(b)));
}

/// Output k gets the descriptor of input i (when the output is present).
void like_input(InferContext& c, size_t k, size_t i) {
  if (k < c.num_outputs()) c.set_output(k, c.dtype(i), c.shape(i));
}

/// Elementwise gradient (dY, T [, extra...]): dX has dY's shape.
OpSchema elementwise_grad(int max_in, std::vector<AttrSpec> attrs = {}) {
  return grad_schema(2, max_in, 1, std::move(attrs), [](InferContext& c) {
    check_same(c, 0, 1);
    like_input(c, 0, 0);
  });
}

Shape attr_shape(InferContext& c, const char* key) {
  if (!c.node().has_attr(key)) c.fail(std::string("attribute ") + key + " is required");
  return c.node().attr_ints(key);
}

}  // namespace

// dX = dY * (Y > 0)
OpSchema schema_ReluGrad() {
  return elementwise_grad(2);
}
// dX = dY * (X > 0 ? 1 : alpha)
OpSchema schema_LeakyReluGrad() {
  return elementwise_grad(2, {{"alpha", AttrType::kFloat}});
}
// dX = dY * (0 < alpha X + beta < 1 ? alpha : 0)
OpSchema schema_HardSigmoidGrad() {
  return elementwise_grad(2, {{"alpha", AttrType::kFloat}, {"beta", AttrType::kFloat}});
}
// dX = dY * (X < -3 ? 0 : X > 3 ? 1 : X / 3 + 1/2)
OpSchema schema_HardSwishGrad() {
  return elementwise_grad(2);
}
// dX = dY * Y * (1 - Y)
OpSchema schema_SigmoidGrad() {
  return elementwise_grad(2);
}
// dX = dY * (1 - Y^2)
OpSchema schema_TanhGrad() {
  return elementwise_grad(2);
}
// dX = dY * Gelu'(X), exact (erf) or tanh approximation.
OpSchema schema_GeluGrad() {
  return elementwise_grad(2, {{"approximate", AttrType::kString}});
}
// (dY, X, min?, max?): dX = dY where min <= X <= max, else 0.
OpSchema schema_ClipGrad() {
  return elementwise_grad(4);
}
// (dY, mask, ratio?): dX = dY * mask / (1 - ratio); ratio defaults to 0.5.
OpSchema schema_DropoutGrad() {
  return elementwise_grad(3);
}
// (dY, Y): dX = Y * (dY - sum_axis(dY * Y))
OpSchema schema_SoftmaxGrad() {
  return elementwise_grad(2, {{"axis", AttrType::kInt}});
}
// (dY, Y): dX = dY - exp(Y) * sum_axis(dY)
OpSchema schema_LogSoftmaxGrad() {
  return elementwise_grad(2, {{"axis", AttrType::kInt}});
}

// (dY, X, W) -> (dX, dW, dB) with Conv's attributes; dB = sum of dY over N and space.
OpSchema schema_ConvGrad() {
  return grad_schema(3, 3, 3, schema_Conv().attrs, [](InferContext& c) {
    like_input(c, 0, 1);
    like_input(c, 1, 2);
    if (c.num_outputs() > 2) c.set_output(2, c.dtype(0), {c.shape(2)[0]});
  });
}
// (dY, X, W) -> (dX, dW, dB) with ConvTranspose's attributes; W is (C, M/group, k...).
OpSchema schema_ConvTransposeGrad() {
  return grad_schema(3, 3, 3, schema_ConvTranspose().attrs, [](InferContext& c) {
    like_input(c, 0, 1);
    like_input(c, 1, 2);
    const int64_t group = c.node().attr_int("group", 1);
    if (c.num_outputs() > 2) c.set_output(2, c.dtype(0), {c.shape(2)[1] * group});
  });
}
// (dY, X) -> dX: dY routed to the first maximum of each window (MaxPool's attributes).
OpSchema schema_MaxPoolGrad() {
  return grad_schema(2, 2, 1, schema_MaxPool().attrs, [](InferContext& c) { like_input(c, 0, 1); });
}
// dY -> dX of shape `input_shape`, each window's gradient spread over the
// elements it averaged (AveragePool's attributes).
OpSchema schema_AveragePoolGrad() {
  std::vector<AttrSpec> attrs = schema_AveragePool().attrs;
  attrs.push_back({"input_shape", AttrType::kInts});
  return grad_schema(1, 1, 1, attrs, [](InferContext& c) {
    c.set_output(0, c.dtype(0), attr_shape(c, "input_shape"));
  });
}

// (dY, X, scale) -> (dX, dscale, dB): training mode, batch statistics over
// (N, D...) recomputed from X.
OpSchema schema_BatchNormalizationGrad() {
  return grad_schema(3, 3, 3, {{"epsilon", AttrType::kFloat}}, [](InferContext& c) {
    check_same(c, 0, 1);
    like_input(c, 0, 1);
    like_input(c, 1, 2);
    like_input(c, 2, 2);
  });
}
// (dY, X, scale) -> (dX, dscale, dB): statistics over the axes from `axis` on,
// recomputed from X; dscale and dB have scale's shape.
OpSchema schema_LayerNormalizationGrad() {
  return grad_schema(3, 3, 3, {{"axis", AttrType::kInt}, {"epsilon", AttrType::kFloat}},
                     [](InferContext& c) {
                       check_same(c, 0, 1);
                       like_input(c, 0, 1);
                       like_input(c, 1, 2);
                       like_input(c, 2, 2);
                     });
}

// (dloss, scores, labels, weights?) -> dscores = dloss * (softmax(scores) - onehot(labels))
// scaled by the weights and the reduction, 0 at ignore_index.
OpSchema schema_SoftmaxCrossEntropyLossGrad() {
  return grad_schema(3, 4, 1, schema_SoftmaxCrossEntropyLoss().attrs,
                     [](InferContext& c) { like_input(c, 0, 1); });
}
// (dloss, input, labels, weights?) -> dinput = -dloss * weight at the label, 0 elsewhere.
OpSchema schema_NegativeLogLikelihoodLossGrad() {
  return grad_schema(3, 4, 1, schema_NegativeLogLikelihoodLoss().attrs,
                     [](InferContext& c) { like_input(c, 0, 1); });
}

// (dY, indices) -> ddata of shape `data_shape`: scatter-add of dY (negative indices wrap).
OpSchema schema_GatherGrad() {
  return grad_schema(
      2, 2, 1, {{"axis", AttrType::kInt}, {"data_shape", AttrType::kInts}},
      [](InferContext& c) { c.set_output(0, c.dtype(0), attr_shape(c, "data_shape")); });
}
// dY -> dX of shape `input_shape`, zero except dX[starts + i * steps] = dY[i]
// (starts and steps given for every axis, already normalised).
OpSchema schema_SliceGrad() {
  return grad_schema(
      1, 1, 1,
      {{"input_shape", AttrType::kInts}, {"starts", AttrType::kInts}, {"steps", AttrType::kInts}},
      [](InferContext& c) {
        Shape s = attr_shape(c, "input_shape");
        if (c.node().attr_ints("starts").size() != s.size() ||
            c.node().attr_ints("steps").size() != s.size())
          c.fail("starts and steps need one entry per axis of " + shape_str(s));
        c.set_output(0, c.dtype(0), s);
      });
}

// (X, W, R, B, sequence_lens, initial_h, initial_c, P, dY, dY_h, dY_c) ->
// (dX, dW, dR, dB, dinitial_h, dinitial_c), LSTM's attributes; the forward
// is recomputed. Absent forward inputs and absent upstream gradients are "".
OpSchema schema_LSTMGrad() {
  return grad_schema(3, 11, 6, schema_LSTM().attrs, [](InferContext& c) {
    static const size_t kFrom[] = {0, 1, 2, 3, 5, 6};
    for (size_t k = 0; k < c.num_outputs() && k < 6; ++k)
      if (c.node().has_output(k)) {
        if (!c.has_input(kFrom[k])) c.fail("a gradient was asked for an absent input");
        like_input(c, k, kFrom[k]);
      }
  });
}

}  // namespace pipetrain::ir
