// Nodes whose meaning changed between opset 11 and the opset our schemas
// implement are rewritten into an equivalent form here, so kernels only ever
// see one semantics. Attribute-vs-input moves (Squeeze axes, ReduceSum axes,
// Split split, ...) need no rewrite: the schemas accept both forms.
#include "importer/internal.h"
#include "importer/op_expansions.h"
#include "ir/error.h"

namespace pipetrain::importer::detail {

namespace {

std::string fresh_name(const std::string& base, std::set<std::string>& taken) {
  std::string name = base;
  for (int k = 1; taken.count(name); ++k) name = base + "_" + std::to_string(k);
  taken.insert(name);
  return name;
}

std::string fresh_tensor(const ir::Graph& g, const std::string& base,
                         std::set<std::string>& taken) {
  std::string name = base;
  for (int k = 1; g.has_tensor(name) || taken.count(name); ++k)
    name = base + "_" + std::to_string(k);
  taken.insert(name);
  return name;
}

// Softmax / LogSoftmax / Hardmax before opset 13: the input is coerced to 2-D at
// `axis` (default 1), (d0*..*d[a-1], d[a]*..*d[r-1]), and the normalisation
// runs over the whole second dimension. From 13 on it runs over one axis
// (default -1). When a == r-1 both agree; otherwise
//   y = Reshape(Softmax13(Reshape(x, (p, q)), axis=-1), shape(x)).
std::optional<std::vector<ir::Node>> rewrite_softmax(ir::Graph& g, const ir::Node& n,
                                                     std::set<std::string>& taken) {
  if (!n.has_input(0) || !g.has_tensor(n.inputs[0]) || n.outputs.size() != 1) return std::nullopt;
  const ir::Shape x_shape = g.tensor(n.inputs[0]).shape;
  const int64_t rank = static_cast<int64_t>(x_shape.size());
  int64_t axis = n.attr_int("axis", 1);
  if (rank == 0 || axis < -rank || axis >= rank) return std::nullopt;  // the schema reports it
  if (axis < 0) axis += rank;
  ir::Node softmax = n;
  softmax.attrs["axis"] = int64_t{-1};
  if (axis == rank - 1) return std::vector<ir::Node>{softmax};

  int64_t p = 1, q = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? p : q) *= x_shape[static_cast<size_t>(i)];
  const std::string shape2d = fresh_tensor(g, n.name + "_shape2d", taken);
  const std::string shape_nd = fresh_tensor(g, n.name + "_shape", taken);
  g.set_value(shape2d, ir::Tensor::from_i64({p, q}, {2}), ir::Role::kConstant);
  g.set_value(shape_nd, ir::Tensor::from_i64(x_shape, {rank}), ir::Role::kConstant);
  const std::string x2d = fresh_tensor(g, n.inputs[0] + "_2d", taken);
  const std::string y2d = fresh_tensor(g, n.outputs[0] + "_2d", taken);

  ir::Node flatten{
      fresh_name(n.name + "_to2d", taken), "Reshape", {n.inputs[0], shape2d}, {x2d}, {}};
  softmax.inputs = {x2d};
  softmax.outputs = {y2d};
  ir::Node back{
      fresh_name(n.name + "_from2d", taken), "Reshape", {y2d, shape_nd}, {n.outputs[0]}, {}};
  return std::vector<ir::Node>{flatten, softmax, back};
}

// PRelu before opset 7: a 1-D slope of C values applies per channel (axis 1);
// from 7 on it broadcasts numpy-style from the right. A Reshape to
// (C, 1, ..., 1) makes the old form the new one.
std::optional<std::vector<ir::Node>> rewrite_prelu(ir::Graph& g, const ir::Node& n,
                                                   std::set<std::string>& taken) {
  if (n.inputs.size() != 2 || !g.has_tensor(n.inputs[0]) || !g.has_tensor(n.inputs[1]))
    return std::nullopt;
  const ir::Shape& x = g.tensor(n.inputs[0]).shape;
  const ir::Shape& slope = g.tensor(n.inputs[1]).shape;
  if (x.size() < 3 || slope.size() != 1 || slope[0] != x[1] || slope[0] == 1) return std::nullopt;
  ir::Shape per_channel(x.size() - 1, 1);
  per_channel[0] = slope[0];
  const std::string shape = fresh_tensor(g, n.name + "_slope_shape", taken);
  g.set_value(shape, ir::Tensor::from_i64(per_channel, {static_cast<int64_t>(per_channel.size())}),
              ir::Role::kConstant);
  const std::string reshaped = fresh_tensor(g, n.inputs[1] + "_per_channel", taken);
  ir::Node reshape{
      fresh_name(n.name + "_slope", taken), "Reshape", {n.inputs[1], shape}, {reshaped}, {}};
  ir::Node prelu = n;
  prelu.inputs[1] = reshaped;
  return std::vector<ir::Node>{reshape, prelu};
}

/// A dtype attribute naming float64 (Cast's `to`, EyeLike's `dtype`, the
/// windows' `output_datatype`) names float32: float64 models run in float32.
std::optional<std::vector<ir::Node>> rewrite_float64_attr(const ir::Node& n) {
  for (const char* key : {"to", "dtype", "output_datatype"}) {
    if (!n.has_attr(key) || ir::attr_type(n.attrs.at(key)) != ir::AttrType::kInt ||
        n.attr_int(key, 0) != onnx::TensorProto::DOUBLE)
      continue;
    ir::Node wide = n;
    wide.attrs[key] = ir::Attribute(static_cast<int64_t>(onnx::TensorProto::FLOAT));
    return std::vector<ir::Node>{wide};
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<ir::Node>> rewrite_for_opset(ir::Graph& g, const ir::Node& n,
                                                       std::set<std::string>& taken) {
  if (auto narrowed = rewrite_float64_attr(n)) {
    // Expansions (the windows) see the rewritten node.
    if (auto it = expanded_ops().find(n.op_type); it != expanded_ops().end())
      return it->second.expand(g, narrowed->front(), taken);
    return narrowed;
  }
  if (auto it = expanded_ops().find(n.op_type); it != expanded_ops().end())
    return it->second.expand(g, n, taken);
  if (auto widened = rewrite_narrow_dtype_attr(g, n, taken)) return widened;
  if (auto pooled = rewrite_integer_max_pool(g, n, taken)) return pooled;
  if (g.opset < 13 &&
      (n.op_type == "Softmax" || n.op_type == "LogSoftmax" || n.op_type == "Hardmax")) {
    // Rewritten nodes carry axis=-1 on a 2-D input, which maps to itself.
    if (n.has_attr("axis") && n.attr_int("axis", 1) == -1) return std::nullopt;
    return rewrite_softmax(g, n, taken);
  }
  if (g.source_opset < 7 && n.op_type == "PRelu") return rewrite_prelu(g, n, taken);
  return std::nullopt;
}

}  // namespace pipetrain::importer::detail
