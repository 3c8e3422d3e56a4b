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
  std::vector<LayoutAccess> access(g.nodes.size());
  std::map<std::string, size_t> producer;
  std::set<std::string>& set = plan.tensors;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    access[i] = backend.layout_access(g, n);
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty()) producer[n.outputs[k]] = i;
    const LayoutAccess& a = access[i];
    for (size_t k = 0; k < n.outputs.size() && k < 32; ++k) {
      const bool may = a.role == LayoutRole::kSameLayout ? k == 0
                       : a.role == LayoutRole::kConvLike ? ((a.outputs >> k) & 1u) != 0
                                                         : false;
      const std::string& y = n.outputs[k];
      if (may && !y.empty() && g.has_tensor(y) && backend.blockable(g.tensor(y)) &&
          !plain.count(y) && !g.value(y))
        set.insert(y);
    }
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
      const size_t p = producer.at(t);
      bool ok = access[p].role != LayoutRole::kSameLayout || node_all_in(p);
      for (size_t c : consumers[t]) {
        if (!ok) break;
        const ir::Node& n = g.nodes[c];
        if (access[c].role == LayoutRole::kConvLike) {
          // Every port that reads t must take it blocked.
          for (size_t i = 0; i < n.inputs.size(); ++i)
            if (n.inputs[i] == t) ok = ok && i < 32 && ((access[c].inputs >> i) & 1u) != 0;
        } else {
          ok = access[c].role == LayoutRole::kSameLayout && node_all_in(c);
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
