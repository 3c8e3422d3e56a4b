#include "autodiff/grad_builder.h"

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain::autodiff {

GradBuilder::GradBuilder(ir::Graph& g, size_t node_index, std::vector<std::string> output_grads,
                         std::vector<bool> wants)
    : g_(g),
      node_index_(node_index),
      output_grads_(std::move(output_grads)),
      wants_(std::move(wants)) {}

void GradBuilder::set_GI(size_t i, const std::string& grad) {
  if (!wants(i) || grad.empty()) return;
  if (shape(grad) != shape(I(i)))
    throw RuntimeFault(node().describe() + ": gradient rule produced " +
                       ir::shape_str(shape(grad)) + " for input '" + I(i) + "' of shape " +
                       ir::shape_str(shape(I(i))));
  input_grads_[i] = grad;
}

std::vector<std::string> GradBuilder::emit(const std::string& op, std::vector<std::string> inputs,
                                           size_t num_outputs,
                                           std::map<std::string, ir::Attribute> attrs,
                                           std::vector<bool> skip) {
  ir::Node n;
  n.name = fmt::format("{}/Grad/{}_{}", node().name, op, g_.nodes.size());
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.layer = node().layer;
  n.backward = true;
  for (size_t k = 0; k < num_outputs; ++k)
    n.outputs.push_back(k < skip.size() && skip[k] ? "" : fmt::format("{}:{}", n.name, k));
  auto outs = ir::infer_node(g_, n);
  for (size_t k = 0; k < num_outputs; ++k)
    if (!n.outputs[k].empty())
      g_.set_tensor({n.outputs[k], outs[k].first, outs[k].second, ir::Role::kGrad});
  std::vector<std::string> names = n.outputs;
  if (n.layer >= 0 && static_cast<size_t>(n.layer) < g_.layers.size())
    g_.layers[static_cast<size_t>(n.layer)].nodes.push_back(g_.nodes.size());
  g_.nodes.push_back(std::move(n));
  return names;
}

std::string GradBuilder::emit1(const std::string& op, std::vector<std::string> inputs,
                               std::map<std::string, ir::Attribute> attrs) {
  return emit(op, std::move(inputs), 1, std::move(attrs))[0];
}

std::string GradBuilder::scalar(float v) {
  std::string name = fmt::format("autodiff/scalar_{}", v);
  if (!g_.has_value(name)) g_.set_value(name, ir::Tensor::scalar_f32(v), ir::Role::kConstant);
  return name;
}

std::string GradBuilder::ints(const std::vector<int64_t>& v) {
  std::string name = fmt::format("autodiff/ints_[{}]", fmt::join(v, ","));
  if (!g_.has_value(name))
    g_.set_value(name, ir::Tensor::from_i64(v, {static_cast<int64_t>(v.size())}),
                 ir::Role::kConstant);
  return name;
}

std::string GradBuilder::reshape(const std::string& t, const ir::Shape& s) {
  if (shape(t) == s) return t;
  return emit1("Reshape", {t, ints(s)});
}

std::string GradBuilder::reduce_to(const std::string& grad, const ir::Shape& target) {
  const ir::Shape from = shape(grad);
  if (from == target) return grad;
  const size_t extra = from.size() - target.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < from.size(); ++i)
    if (i < extra || (target[i - extra] == 1 && from[i] != 1))
      axes.push_back(static_cast<int64_t>(i));
  std::string summed = axes.empty() ? grad
                                    : emit1("ReduceSum", {grad, ints(axes)},
                                            {{"keepdims", ir::Attribute(int64_t{1})}});
  return reshape(summed, target);
}

std::string GradBuilder::ensure_output(size_t k, const std::string& name_hint) {
  if (node().has_output(k)) return O(k);
  ir::Node& n = g_.nodes[node_index_];
  n.outputs.resize(std::max(n.outputs.size(), k + 1));
  n.outputs[k] = n.name + "/" + name_hint;
  auto outs = ir::infer_node(g_, n);
  g_.set_tensor({n.outputs[k], outs[k].first, outs[k].second, ir::Role::kActivation});
  return n.outputs[k];
}

void GradBuilder::unsupported(const std::string& what) const {
  throw UnsupportedOp(node().describe() + ": no gradient for " + what);
}

}  // namespace pipetrain::autodiff
