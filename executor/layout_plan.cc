#include "executor/layout_plan.h"

#include <map>

namespace pipetrain::exec {

namespace {

// A kSameLayout node's inputs that carry the layout (scalars do not).
bool carries_layout(const ir::Graph& g, const std::string& t) {
  return !t.empty() && g.has_tensor(t) && ir::numel(g.tensor(t).shape) != 1;
}

}  // namespace

LayoutPlan plan_blocked_layout(const ir::Graph& g, const Backend& backend,
                               const std::set<std::string>& plain) {
  LayoutPlan plan;
  plan.inputs.assign(g.nodes.size(), 0);
  plan.outputs.assign(g.nodes.size(), 0);
  std::vector<LayoutRole> role(g.nodes.size());
  std::map<std::string, size_t> producer;
  std::set<std::string>& set = plan.tensors;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    role[i] = backend.layout_role(g, n);
    for (const auto& out : n.outputs)
      if (!out.empty()) producer[out] = i;
    if (role[i] == LayoutRole::kPlainOnly || !n.has_output(0)) continue;
    const std::string& y = n.outputs[0];
    if (g.has_tensor(y) && backend.blockable(g.tensor(y)) && !plain.count(y) && !g.value(y))
      set.insert(y);
  }
  if (set.empty()) return plan;
  auto consumers = g.consumers();
  // A same-layout node is all in or all out: its output with its layout-carrying inputs.
  auto node_all_in = [&](size_t c) {
    const ir::Node& n = g.nodes[c];
    if (!set.count(n.outputs[0])) return false;
    for (const auto& in : n.inputs)
      if (carries_layout(g, in) && !set.count(in)) return false;
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = set.begin(); it != set.end();) {
      const std::string& t = *it;
      bool ok = role[producer.at(t)] != LayoutRole::kSameLayout || node_all_in(producer.at(t));
      for (size_t c : consumers[t]) {
        if (!ok) break;
        const ir::Node& n = g.nodes[c];
        if (role[c] == LayoutRole::kConvLike) {
          for (size_t i = 1; i < n.inputs.size(); ++i) ok = ok && n.inputs[i] != t;
          ok = ok && n.inputs[0] == t;
        } else {
          ok = role[c] == LayoutRole::kSameLayout && node_all_in(c);
        }
      }
      if (ok) {
        ++it;
      } else {
        it = set.erase(it);
        changed = true;
      }
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    for (size_t k = 0; k < n.inputs.size() && k < 32; ++k)
      if (set.count(n.inputs[k])) plan.inputs[i] |= 1u << k;
    for (size_t k = 0; k < n.outputs.size() && k < 32; ++k)
      if (set.count(n.outputs[k])) plan.outputs[i] |= 1u << k;
  }
  return plan;
}

}  // namespace pipetrain::exec
