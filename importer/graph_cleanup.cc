// Identity nodes carry nothing but a new name (PyTorch emits one per shared
// or re-exported weight). Readers are rewired to the Identity's input, so a
// parameter reaches its consumers as itself: kernels can then cache derived
// forms of it, and the partitioner sees one tensor, not two.
#include <map>
#include <set>

#include "importer/internal.h"

namespace pipetrain::importer::detail {

void elide_identities(ir::Graph& g) {
  std::set<std::string> graph_outputs(g.outputs.begin(), g.outputs.end());
  std::map<std::string, std::string> alias;  // Identity output -> its input
  std::vector<ir::Node> kept;
  for (auto& n : g.nodes) {
    if (n.op_type == "Identity" && n.has_input(0) && n.has_output(0) &&
        !graph_outputs.count(n.outputs[0])) {
      alias[n.outputs[0]] = n.inputs[0];
      g.erase_tensor(n.outputs[0]);
      continue;
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  if (alias.empty()) return;
  for (auto& n : g.nodes)
    for (auto& in : n.inputs) {
      for (auto it = alias.find(in); it != alias.end(); it = alias.find(in)) in = it->second;
    }
  g.layers.clear();
}

}  // namespace pipetrain::importer::detail
