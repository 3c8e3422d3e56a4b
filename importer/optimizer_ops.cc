// The optimizer ops of ONNX's ai.onnx.preview.training domain (Adagrad,
// Momentum, Adam; Gradient is in gradient_op.cc), expanded at import into their specification's
// formulas; their IR op name keeps the domain ("ai.onnx.preview.training.Adam"). Each updates n
// tensors at once: inputs R (learning rate), T (update count), then the n X, the n G and the n of
// each state; outputs the new X and states.
#include "importer/expansion_builder.h"
#include "importer/internal.h"

namespace pipetrain::importer::detail {

namespace {

using Builder = ExpansionBuilder;
using ir::Attribute;

/// n, the number of tensors updated, from the input count 2 + per_tensor * n.
size_t tensor_count(Builder& b, const ir::Node& n, size_t per_tensor) {
  const size_t in = n.inputs.size();
  if (in < 2 + per_tensor || (in - 2) % per_tensor != 0 ||
      n.outputs.size() != (in - 2) / per_tensor * (per_tensor - 1))
    b.fail(std::to_string(in) + " inputs and " + std::to_string(n.outputs.size()) +
           " outputs do not make R, T and " + std::to_string(per_tensor) + " tensors per update");
  return (in - 2) / per_tensor;
}

std::string attr_scalar(Builder& b, const ir::Node& n, const char* key, float fallback) {
  return b.scalar(n.attr_float(key, fallback));
}

/// norm_coefficient * X + G (G as is when the coefficient is 0).
std::string regularized(Builder& b, const ir::Node& n, const std::string& x, const std::string& g) {
  if (n.attr_float("norm_coefficient", 0.f) == 0.f) return g;
  return b.op("Add", {b.op("Mul", {attr_scalar(b, n, "norm_coefficient", 0.f), x}), g});
}

std::string t_as_float(Builder& b, const ir::Node& n) {
  return b.op("Cast", {n.inputs[1]}, {{"to", Attribute(int64_t{onnx::TensorProto::FLOAT})}});
}

/// T > 0 ? a : b, elementwise on scalars.
std::string if_updated(Builder& b, const ir::Node& n, const std::string& a, const std::string& c) {
  const std::string positive = b.op("Greater", {t_as_float(b, n), b.scalar(0.f)});
  return b.op("Where", {positive, a, c});
}

std::vector<ir::Node> adagrad(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const size_t k = tensor_count(b, n, 3);
  // r = R / (1 + T * decay_factor)
  const std::string r = b.op(
      "Div", {n.inputs[0],
              b.op("Add", {b.scalar(1.f), b.op("Mul", {t_as_float(b, n),
                                                       attr_scalar(b, n, "decay_factor", 0.f)})})});
  for (size_t i = 0; i < k; ++i) {
    const std::string& x = n.inputs[2 + i];
    const std::string gr = regularized(b, n, x, n.inputs[2 + k + i]);
    const std::string h =
        b.op("Add", {n.inputs[2 + 2 * k + i], b.op("Mul", {gr, gr})}, {}, n.outputs[k + i]);
    const std::string adaptive =
        b.op("Add", {b.op("Sqrt", {h}), attr_scalar(b, n, "epsilon", 0.f)});
    b.op("Sub", {x, b.op("Div", {b.op("Mul", {r, gr}), adaptive})}, {}, n.outputs[i]);
  }
  return std::move(b.nodes);
}

std::vector<ir::Node> momentum(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const size_t k = tensor_count(b, n, 3);
  const std::string mode = n.attr_string("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    b.fail("mode '" + mode + "' (standard or nesterov)");
  const std::string alpha = attr_scalar(b, n, "alpha", 0.f);
  const std::string beta = if_updated(b, n, attr_scalar(b, n, "beta", 0.f), b.scalar(1.f));
  for (size_t i = 0; i < k; ++i) {
    const std::string& x = n.inputs[2 + i];
    const std::string gr = regularized(b, n, x, n.inputs[2 + k + i]);
    const std::string v =
        b.op("Add", {b.op("Mul", {alpha, n.inputs[2 + 2 * k + i]}), b.op("Mul", {beta, gr})}, {},
             n.outputs[k + i]);
    const std::string step = mode == "standard" ? v : b.op("Add", {gr, b.op("Mul", {alpha, v})});
    b.op("Sub", {x, b.op("Mul", {n.inputs[0], step})}, {}, n.outputs[i]);
  }
  return std::move(b.nodes);
}

std::vector<ir::Node> adam(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const size_t k = tensor_count(b, n, 4);
  const float alpha = n.attr_float("alpha", 0.9f), beta = n.attr_float("beta", 0.999f);
  // R * sqrt(1 - beta^T) / (1 - alpha^T) once T > 0, else R.
  const std::string tf = t_as_float(b, n), one = b.scalar(1.f);
  const std::string corrected = b.op(
      "Div", {b.op("Mul", {n.inputs[0],
                           b.op("Sqrt", {b.op("Sub", {one, b.op("Pow", {b.scalar(beta), tf})})})}),
              b.op("Sub", {one, b.op("Pow", {b.scalar(alpha), tf})})});
  const std::string r = if_updated(b, n, corrected, n.inputs[0]);
  const float post = n.attr_float("norm_coefficient_post", 0.f);
  for (size_t i = 0; i < k; ++i) {
    const std::string& x = n.inputs[2 + i];
    const std::string gr = regularized(b, n, x, n.inputs[2 + k + i]);
    const std::string v = b.op("Add",
                               {b.op("Mul", {b.scalar(alpha), n.inputs[2 + 2 * k + i]}),
                                b.op("Mul", {b.scalar(1.f - alpha), gr})},
                               {}, n.outputs[k + i]);
    const std::string h = b.op("Add",
                               {b.op("Mul", {b.scalar(beta), n.inputs[2 + 3 * k + i]}),
                                b.op("Mul", {b.scalar(1.f - beta), b.op("Mul", {gr, gr})})},
                               {}, n.outputs[2 * k + i]);
    const std::string denom = b.op("Add", {b.op("Sqrt", {h}), attr_scalar(b, n, "epsilon", 0.f)});
    const std::string updated = b.op("Sub", {x, b.op("Mul", {r, b.op("Div", {v, denom})})});
    if (post == 0.f)
      b.op("Identity", {updated}, {}, n.outputs[i]);
    else
      b.op("Mul", {b.scalar(1.f - post), updated}, {}, n.outputs[i]);
  }
  return std::move(b.nodes);
}

}  // namespace

const std::map<std::string, Expansion>& optimizer_expansions() {
  static const std::map<std::string, Expansion> ops = {
      {std::string(kPreviewTrainingDomain) + ".Adagrad", {"Mul, Add, Sqrt, Div, Sub", adagrad}},
      {std::string(kPreviewTrainingDomain) + ".Momentum", {"Mul, Add, Where, Sub", momentum}},
      {std::string(kPreviewTrainingDomain) + ".Adam",
       {"Mul, Add, Pow, Sqrt, Div, Where, Sub", adam}},
      {std::string(kPreviewTrainingDomain) + ".Gradient",
       {"the backward nodes pipetrain's autodiff writes for it", expand_gradient}},
  };
  return ops;
}

}  // namespace pipetrain::importer::detail
