// One walk over the nodes in topological order that rewrites old-opset
// nodes, folds constant nodes into values and infers every other node's
// output descriptors. Because producers come first, one pass reaches the
// fixpoint of "fold, infer shapes, fold": a Reshape whose shape comes from a
// Shape -> Gather -> Concat chain sees a constant by the time it is reached.
#include <deque>

#include "importer/internal.h"
#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain::importer::detail {

namespace {

void infer_into(ir::Graph& g, const ir::Node& n) {
  auto outs = ir::infer_node(g, n);
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    if (n.outputs[k].empty()) continue;
    g.set_tensor({n.outputs[k], outs[k].first, outs[k].second, ir::Role::kActivation});
  }
}

}  // namespace

void infer_and_fold(ir::Graph& g, bool fold) {
  std::set<std::string> taken;
  for (const auto& n : g.nodes) taken.insert(n.name);
  std::deque<ir::Node> work;
  for (size_t i : g.topo_order()) work.push_back(std::move(g.nodes[i]));
  g.nodes.clear();
  while (!work.empty()) {
    ir::Node n = std::move(work.front());
    work.pop_front();
    if (auto replacement = rewrite_for_opset(g, n, taken)) {
      // Replacements are in topological order and take the node's place.
      for (auto it = replacement->rbegin(); it != replacement->rend(); ++it)
        work.push_front(std::move(*it));
      continue;
    }
    if (fold) {
      if (auto values = fold_node(g, n)) {
        for (size_t k = 0; k < n.outputs.size() && k < values->size(); ++k)
          if (!n.outputs[k].empty())
            g.set_value(n.outputs[k], std::move((*values)[k]), ir::Role::kConstant);
        continue;
      }
    }
    infer_into(g, n);
    g.nodes.push_back(std::move(n));
  }
}

void drop_unused_values(ir::Graph& g) {
  std::set<std::string> read(g.outputs.begin(), g.outputs.end());
  for (const auto& n : g.nodes)
    for (const auto& in : n.inputs) read.insert(in);
  std::vector<std::string> unused;
  for (const auto& [name, value] : g.values())
    if (!read.count(name)) unused.push_back(name);
  for (const auto& name : unused) g.erase_tensor(name);
}

}  // namespace pipetrain::importer::detail
