// build_backward: which tensors need a gradient, then one reverse sweep over
// the forward nodes applying each op's rule and summing the gradients of
// tensors that fan out.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "autodiff/autodiff.h"
#include "autodiff/grad_builder.h"
#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain::autodiff {

namespace {

/// Drops backward node `i` (its output tensors too): the nodes after it
/// move up one place, and the layers' node lists with them.
void erase_backward_node(ir::Graph& g, size_t i) {
  for (const auto& o : g.nodes[i].outputs)
    if (!o.empty()) g.erase_tensor(o);
  g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
  for (auto& layer : g.layers) {
    auto& ids = layer.nodes;
    ids.erase(std::remove(ids.begin(), ids.end(), i), ids.end());
    for (size_t& id : ids)
      if (id > i) --id;
  }
}

/// When every contribution is a SliceGrad (unit steps, one input shape) and
/// their slices cut one axis into pieces that tile it, as a packed q/k/v
/// projection's three Slices do: the sum is the Concat of their dYs (the
/// zeros each scattered add nothing), one pass where the SliceGrads and the
/// Adds wrote and reread the full tensor five times. The SliceGrads are
/// dropped. Returns the Concat's output, or "" where the pattern does not hold.
std::string concat_of_slice_grads(ir::Graph& g, const std::string& tensor,
                                  const std::vector<std::string>& parts, int layer) {
  if (parts.size() < 2) return "";
  struct Piece {
    size_t node;
    int64_t start, extent;
    std::string dy;
  };
  std::vector<Piece> pieces;
  ir::Shape full;
  int64_t axis = -1;
  for (const auto& part : parts) {
    // A rule's fresh output, so its producer is among the newest nodes.
    size_t i = g.nodes.size();
    while (i-- > 0 && (g.nodes[i].outputs.empty() || g.nodes[i].outputs[0] != part)) {
    }
    if (i >= g.nodes.size() || !g.nodes[i].backward || g.nodes[i].op_type != "SliceGrad") return "";
    const ir::Node& n = g.nodes[i];
    const ir::Shape shape = n.attr_ints("input_shape");
    const auto starts = n.attr_ints("starts");
    const auto steps = n.attr_ints("steps");
    const ir::Shape& dy = g.tensor(n.inputs[0]).shape;
    if (pieces.empty()) full = shape;
    if (shape != full || dy.size() != full.size() || starts.size() != full.size() ||
        g.tensor(n.inputs[0]).dtype != g.tensor(parts[0]).dtype)
      return "";
    for (size_t a = 0; a < full.size(); ++a) {
      if (steps[a] != 1) return "";
      if (starts[a] == 0 && dy[a] == full[a]) continue;  // not cut along a
      if (axis >= 0 && axis != static_cast<int64_t>(a)) return "";
      axis = static_cast<int64_t>(a);
    }
    if (axis < 0) return "";  // a slice of everything: no cut to tile
    pieces.push_back(
        {i, starts[static_cast<size_t>(axis)], dy[static_cast<size_t>(axis)], n.inputs[0]});
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.start < b.start; });
  int64_t next = 0;
  for (const auto& p : pieces) {
    if (p.start != next) return "";  // a gap or an overlap: the sum is not a Concat
    next += p.extent;
  }
  if (next != full[static_cast<size_t>(axis)]) return "";

  ir::Node concat;
  concat.name = tensor + "_grad/Concat";
  concat.op_type = "Concat";
  for (const auto& p : pieces) concat.inputs.push_back(p.dy);
  concat.attrs["axis"] = ir::Attribute(axis);
  concat.outputs = {tensor + "_grad"};
  concat.layer = layer;
  concat.backward = true;
  const ir::DType dtype = g.tensor(parts[0]).dtype;
  std::vector<size_t> gone;
  for (const auto& p : pieces) gone.push_back(p.node);
  std::sort(gone.rbegin(), gone.rend());  // last first: the earlier indices stay put
  for (size_t i : gone) erase_backward_node(g, i);
  g.set_tensor({concat.outputs[0], dtype, full, ir::Role::kGrad});
  if (layer >= 0 && static_cast<size_t>(layer) < g.layers.size())
    g.layers[static_cast<size_t>(layer)].nodes.push_back(g.nodes.size());
  g.nodes.push_back(std::move(concat));
  return tensor + "_grad";
}

/// Sums the contributions to one gradient with a chain of Adds (fixed order:
/// the order the consumers were visited), in `layer`; slices that tile the
/// tensor are concatenated instead (concat_of_slice_grads).
std::string sum_grads(ir::Graph& g, const std::string& tensor,
                      const std::vector<std::string>& parts, int layer) {
  if (std::string c = concat_of_slice_grads(g, tensor, parts, layer); !c.empty()) return c;
  std::string acc = parts[0];
  for (size_t k = 1; k < parts.size(); ++k) {
    ir::Node n;
    n.name = fmt::format("{}_grad/Sum_{}", tensor, k);
    n.op_type = "Add";
    n.inputs = {acc, parts[k]};
    n.outputs = {k + 1 == parts.size() ? tensor + "_grad"
                                       : fmt::format("{}_grad/sum_{}", tensor, k)};
    n.layer = layer;
    n.backward = true;
    const ir::TensorDesc& d = g.tensor(parts[0]);
    g.set_tensor({n.outputs[0], d.dtype, d.shape, ir::Role::kGrad});
    if (layer >= 0 && static_cast<size_t>(layer) < g.layers.size())
      g.layers[static_cast<size_t>(layer)].nodes.push_back(g.nodes.size());
    acc = n.outputs[0];
    g.nodes.push_back(std::move(n));
  }
  return acc;
}

}  // namespace

bool has_gradient_rule(const std::string& op_type) {
  return rule_registry().count(op_type) != 0;
}

BackwardResult build_backward(ir::Graph& g, const std::string& loss,
                              const BackwardOptions& options) {
  if (!g.has_tensor(loss)) throw ModelError("loss '" + loss + "' is not a tensor of the graph");
  const ir::TensorDesc loss_desc = g.tensor(loss);
  if (!ir::is_float(loss_desc.dtype) || ir::numel(loss_desc.shape) != 1)
    throw ModelError("loss '" + loss + "' must be a float tensor with one element, got " +
                     ir::dtype_name(loss_desc.dtype) + " " + ir::shape_str(loss_desc.shape));
  std::vector<std::string> wrt = options.wrt.empty() ? g.params() : options.wrt;
  for (const auto& w : wrt)
    if (!g.has_tensor(w))
      throw ModelError("cannot differentiate with respect to unknown '" + w + "'");

  const std::vector<size_t> order = g.topo_order();
  const auto& rules = rule_registry();

  // Forward sweep: tensors that depend on a wrt tensor through differentiable ops.
  std::set<std::string> requires_grad(wrt.begin(), wrt.end());
  for (size_t i : order) {
    const ir::Node& n = g.nodes[i];
    const ir::OpSchema* s = ir::OpRegistry::instance().find(n.op_type);
    if (!s || !s->differentiable) continue;
    bool any = false;
    for (const auto& in : n.inputs) any = any || (!in.empty() && requires_grad.count(in));
    if (!any) continue;
    for (const auto& out : n.outputs)
      if (!out.empty() && ir::is_float(g.tensor(out).dtype)) requires_grad.insert(out);
  }
  // Backward sweep: of those, the ones the loss depends on.
  std::set<std::string> needed;
  if (requires_grad.count(loss)) needed.insert(loss);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::Node& n = g.nodes[*it];
    bool reaches = false;
    for (const auto& out : n.outputs) reaches = reaches || (!out.empty() && needed.count(out));
    if (!reaches) continue;
    for (const auto& in : n.inputs)
      if (!in.empty() && requires_grad.count(in)) needed.insert(in);
  }
  if (!needed.count(loss))
    throw ModelError("loss '" + loss + "' does not depend on any trainable parameter");

  BackwardResult result;
  result.forward_nodes = g.nodes.size();
  std::map<std::string, std::vector<std::string>> parts;  // tensor -> gradient contributions
  std::map<std::string, int> part_layer;                  // layer of the first consumer
  ir::Tensor seed(loss_desc.dtype, loss_desc.shape);
  seed.data<float>()[0] = 1.0f;
  g.set_value(loss + "_grad_seed", seed, ir::Role::kConstant);
  parts[loss] = {loss + "_grad_seed"};

  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const size_t idx = *it;
    const ir::Node fwd = g.nodes[idx];  // copy: emitting nodes reallocates the list
    std::vector<bool> wants(fwd.inputs.size(), false);
    bool any_want = false;
    for (size_t i = 0; i < fwd.inputs.size(); ++i) {
      wants[i] = !fwd.inputs[i].empty() && needed.count(fwd.inputs[i]) != 0;
      any_want = any_want || wants[i];
    }
    std::vector<std::string> out_grads(fwd.outputs.size());
    bool any_out = false;
    for (size_t k = 0; k < fwd.outputs.size(); ++k) {
      auto p = parts.find(fwd.outputs[k]);
      if (fwd.outputs[k].empty() || p == parts.end()) continue;
      out_grads[k] = sum_grads(g, fwd.outputs[k], p->second, fwd.layer);
      any_out = true;
    }
    if (!any_out || !any_want) continue;
    auto rule = rules.find(fwd.op_type);
    if (rule == rules.end())
      throw UnsupportedOp(fwd.describe() + ": no gradient rule for op " + fwd.op_type);
    if (!rule->second.rule)
      throw RuntimeFault(fwd.describe() + ": gradient requested through an op without gradient");
    GradBuilder b(g, idx, out_grads, wants);
    rule->second.rule(b);
    for (const auto& [i, grad] : b.input_grads()) {
      const std::string& in = fwd.inputs[i];
      parts[in].push_back(grad);
      part_layer.emplace(in, fwd.layer);
    }
  }
  for (const auto& w : wrt) {
    auto p = parts.find(w);
    if (p == parts.end()) continue;
    std::string grad = sum_grads(g, w, p->second, part_layer[w]);
    g.tensor(grad).role = ir::Role::kGrad;
    result.grads[w] = grad;
    g.outputs.push_back(grad);
  }
  result.backward_nodes = g.nodes.size() - result.forward_nodes;
  return result;
}

}  // namespace pipetrain::autodiff
