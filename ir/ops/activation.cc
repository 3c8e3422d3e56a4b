// Schemas of the activations, Softmax/LogSoftmax and Dropout.
#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain::ir {

namespace {

void same_as_input(InferContext& c) {
  c.set_output(0, c.dtype(0), c.shape(0));
}

OpSchema unary(std::vector<AttrSpec> attrs = {}) {
  OpSchema s;
  s.attrs = std::move(attrs);
  s.infer = same_as_input;
  return s;
}

/// An optional scalar operand (Clip's min/max, Dropout's ratio): one element.
void check_scalar_input(InferContext& c, size_t i, const char* what) {
  if (!c.has_input(i)) return;
  if (numel(c.shape(i)) != 1)
    c.fail(std::string(what) + " must be a scalar, got shape " + shape_str(c.shape(i)));
}

/// Softmax and LogSoftmax, opset 13 semantics: normalise along one axis
/// (default -1). Opset < 13 models (axis default 1, input flattened to 2-D)
/// are rewritten by the importer before they reach this schema.
OpSchema softmax_like() {
  OpSchema s;
  s.attrs = {{"axis", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const int64_t axis = c.node().attr_int("axis", -1);
    const int64_t rank = static_cast<int64_t>(c.shape(0).size());
    if (rank == 0) c.fail("input must have rank >= 1, got a scalar");
    if (axis < -rank || axis >= rank)
      c.fail("axis " + std::to_string(axis) + " is out of range for input shape " +
             shape_str(c.shape(0)));
    same_as_input(c);
  };
  return s;
}

}  // namespace

OpSchema schema_Relu() {
  return unary();
}
OpSchema schema_LeakyRelu() {
  return unary({{"alpha", AttrType::kFloat}});
}
/// max(0, min(1, alpha x + beta)); defaults alpha 0.2, beta 0.5.
OpSchema schema_HardSigmoid() {
  return unary({{"alpha", AttrType::kFloat}, {"beta", AttrType::kFloat}});
}
/// x > 0 ? x : alpha (e^x - 1); default alpha 1.
OpSchema schema_Elu() {
  return unary({{"alpha", AttrType::kFloat}});
}
/// gamma (x > 0 ? x : alpha (e^x - 1)); defaults alpha 1.67326, gamma 1.0507.
OpSchema schema_Selu() {
  return unary({{"alpha", AttrType::kFloat}, {"gamma", AttrType::kFloat}});
}
/// max(0, x) + min(0, alpha (e^(x / alpha) - 1)); default alpha 1.
OpSchema schema_Celu() {
  return unary({{"alpha", AttrType::kFloat}});
}
/// x > alpha ? x : 0; default alpha 1.
OpSchema schema_ThresholdedRelu() {
  return unary({{"alpha", AttrType::kFloat}});
}
/// log(1 + e^x).
OpSchema schema_Softplus() {
  return unary();
}
/// x / (1 + |x|).
OpSchema schema_Softsign() {
  return unary();
}
/// x tanh(softplus(x)).
OpSchema schema_Mish() {
  return unary();
}
/// x max(0, min(1, x / 6 + 1/2)) (MobileNetV3).
OpSchema schema_HardSwish() {
  return unary();
}
OpSchema schema_Sigmoid() {
  return unary();
}
OpSchema schema_Tanh() {
  return unary();
}

/// Opset 20: approximate = "none" (exact, erf) or "tanh".
OpSchema schema_Gelu() {
  OpSchema s = unary({{"approximate", AttrType::kString}});
  s.infer = [](InferContext& c) {
    const std::string a = c.node().attr_string("approximate", "none");
    if (a != "none" && a != "tanh")
      c.unsupported("approximate='" + a + "' is not supported (none or tanh)");
    same_as_input(c);
  };
  return s;
}

/// Bounds as attributes (opset < 11) or as optional scalar inputs (opset >= 11).
OpSchema schema_Clip() {
  OpSchema s;
  s.max_inputs = 3;
  s.attrs = {{"min", AttrType::kFloat}, {"max", AttrType::kFloat}};
  s.infer = [](InferContext& c) {
    const char* names[] = {"", "min", "max"};
    for (size_t i = 1; i <= 2; ++i) {
      if (!c.has_input(i)) continue;
      if (c.node().has_attr(names[i]))
        c.fail(std::string("'") + names[i] + "' is given both as an attribute and an input");
      check_scalar_input(c, i, names[i]);
      if (c.dtype(i) != c.dtype(0))
        c.fail(std::string(names[i]) + " is " + dtype_name(c.dtype(i)) + " but the input is " +
               dtype_name(c.dtype(0)));
    }
    same_as_input(c);
  };
  return s;
}

OpSchema schema_Softmax() {
  return softmax_like();
}
OpSchema schema_LogSoftmax() {
  return softmax_like();
}

/// Inputs (data, ratio?, training_mode?), outputs (output, mask?). `ratio` is
/// an attribute before opset 12. Training when training_mode is true or the
/// run is a training run; inference copies data and sets mask all true.
OpSchema schema_Dropout() {
  OpSchema s;
  s.max_inputs = 3;
  s.max_outputs = 2;
  s.attrs = {{"seed", AttrType::kInt}, {"ratio", AttrType::kFloat}};
  s.infer = [](InferContext& c) {
    if (c.has_input(1) && c.node().has_attr("ratio"))
      c.fail("'ratio' is given both as an attribute and an input");
    check_scalar_input(c, 1, "ratio");
    if (c.has_input(1) && !is_float(c.dtype(1)))
      c.fail(std::string("ratio is ") + dtype_name(c.dtype(1)) + ", expected a float type");
    check_scalar_input(c, 2, "training_mode");
    if (c.has_input(2) && c.dtype(2) != DType::kBool)
      c.fail(std::string("training_mode is ") + dtype_name(c.dtype(2)) + ", expected bool");
    float ratio = c.node().attr_float("ratio", 0.5f);
    if (const Tensor* r = c.constant(1)) ratio = static_cast<float>(r->at(0));
    if (!(ratio >= 0.0f && ratio < 1.0f))
      c.fail("ratio " + std::to_string(ratio) + " is outside [0, 1)");
    same_as_input(c);
    if (c.num_outputs() > 1) c.set_output(1, DType::kBool, c.shape(0));
  };
  return s;
}

}  // namespace pipetrain::ir
