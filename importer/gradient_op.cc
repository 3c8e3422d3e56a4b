// The preview training domain's Gradient op: the gradients of its `y` (summed
// when y has several elements) with respect to its `xs`, through the graph
// that computes y. pipetrain's own autodiff writes them at import: on a copy
// of the graph built so far, build_backward appends the backward nodes, and
// those (their tensors renamed under the node's name) replace the node.
#include "autodiff/autodiff.h"
#include "importer/expansion_builder.h"
#include "importer/internal.h"

namespace pipetrain::importer::detail {

std::vector<ir::Node> expand_gradient(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  ExpansionBuilder b(g, n, t);
  const std::vector<std::string> xs = n.attr_strings("xs");
  const std::string y = n.attr_string("y", "");
  if (xs.empty() || y.empty()) b.fail("needs attributes xs and y");
  if (n.outputs.size() != xs.size())
    b.fail(std::to_string(n.outputs.size()) + " outputs for " + std::to_string(xs.size()) + " xs");
  if (!g.has_tensor(y)) b.fail("y '" + y + "' is not computed before it");
  for (const auto& x : xs)
    if (!g.has_tensor(x)) b.fail("xs names '" + x + "', which is not in the graph");

  ir::Graph sub = g;  // the graph so far: y's producers are all in it
  sub.outputs.clear();
  std::string loss = y;
  if (ir::numel(g.tensor(y).shape) != 1) {
    loss = b.fresh("sum");
    sub.nodes.push_back(
        {loss, "ReduceSum", {y}, {loss}, {{"keepdims", ir::Attribute(int64_t{0})}}});
    sub.set_tensor({loss, g.tensor(y).dtype, {}, ir::Role::kActivation});  // a scalar sum
  }
  autodiff::BackwardOptions options;
  options.wrt = xs;
  const autodiff::BackwardResult grads = autodiff::build_backward(sub, loss, options);

  // What the backward pass added (and the loss's ReduceSum), renamed under n's name.
  std::map<std::string, std::string> renamed;
  auto rename = [&](const std::string& name) {
    if (name.empty() || g.has_tensor(name)) return name;
    auto it = renamed.find(name);
    if (it != renamed.end()) return it->second;
    return renamed[name] = b.fresh("grad/" + name);
  };
  for (const auto& [name, value] : sub.values())
    if (!g.has_tensor(name)) g.set_value(rename(name), value, ir::Role::kConstant);
  for (size_t i = g.nodes.size(); i < sub.nodes.size(); ++i) {
    ir::Node copy = sub.nodes[i];
    copy.name = b.fresh(copy.name);
    copy.backward = false;  // a forward computation of this model
    copy.layer = -1;
    for (auto& in : copy.inputs) in = rename(in);
    for (auto& out : copy.outputs) out = rename(out);
    b.nodes.push_back(std::move(copy));
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    auto it = grads.grads.find(xs[i]);
    if (it != grads.grads.end()) {
      b.op("Identity", {rename(it->second)}, {}, n.outputs[i]);
    } else {  // y does not depend on x
      const ir::TensorDesc& d = g.tensor(xs[i]);
      b.op("Identity", {b.constant(ir::Tensor(d.dtype, d.shape))}, {}, n.outputs[i]);
    }
  }
  return std::move(b.nodes);
}

}  // namespace pipetrain::importer::detail
