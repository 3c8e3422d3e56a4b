// Layers from node-name scopes. PyTorch names nodes after the module path
// ("/layer1/layer1.0/conv1/Conv"), so the first k scopes group a model into
// its k-level modules. A layer must be a contiguous run of the topological
// order, so the nodes are first put into a topological order that keeps each
// group together wherever the dependencies allow; a group only splits into
// two layers when it truly interleaves with another.
#include <map>

#include "importer/internal.h"
#include "ir/error.h"

namespace pipetrain::importer::detail {

namespace {

// "/layer1/layer1.0/conv1/Conv" -> {"layer1", "layer1.0", "conv1"}: every
// component but the last, which names the op itself.
std::vector<std::string> scopes_of(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string::npos) slash = name.size();
    if (slash > start) parts.push_back(name.substr(start, slash - start));
    start = slash + 1;
  }
  if (!parts.empty()) parts.pop_back();
  return parts;
}

struct GroupKey {
  std::string key;   // identifies the group ("layer1/layer1.0")
  std::string name;  // the layer's name ("layer1.0")
};

// Nodes with fewer scopes than `depth` group by the scopes they have; a node
// without any scope is its own group (so unscoped models stay one node per layer).
GroupKey group_of(const ir::Node& n, int depth) {
  auto scopes = scopes_of(n.name);
  if (scopes.empty()) {
    std::string own(1, '\x01');  // cannot collide with a scope path
    own += n.name;
    return {own, n.name};
  }
  size_t k = std::min(scopes.size(), static_cast<size_t>(depth));
  std::string key;
  for (size_t i = 0; i < k; ++i) {
    if (i) key += '/';
    key += scopes[i];
  }
  return {key, scopes[k - 1]};
}

// Kahn's algorithm that prefers ready nodes of the current group (smallest
// index first), and switches to the group of the smallest ready node only
// when the current group has none ready.
std::vector<size_t> grouped_topo_order(const ir::Graph& g, const std::vector<GroupKey>& groups) {
  const size_t n = g.nodes.size();
  auto prod = g.producers();
  std::vector<size_t> pending(n, 0);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i) {
    std::set<size_t> deps;
    for (const auto& in : g.nodes[i].inputs) {
      auto it = prod.find(in);
      if (!in.empty() && it != prod.end()) deps.insert(it->second);
    }
    for (size_t d : deps) users[d].push_back(i);
    pending[i] = deps.size();
  }
  std::set<size_t> ready;
  std::map<std::string, std::set<size_t>> ready_by_group;
  auto make_ready = [&](size_t i) {
    ready.insert(i);
    ready_by_group[groups[i].key].insert(i);
  };
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) make_ready(i);
  std::vector<size_t> order;
  std::string current;
  while (!ready.empty()) {
    auto same = ready_by_group.find(current);
    size_t i = same != ready_by_group.end() && !same->second.empty() ? *same->second.begin()
                                                                     : *ready.begin();
    current = groups[i].key;
    ready.erase(i);
    ready_by_group[current].erase(i);
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0) make_ready(u);
  }
  if (order.size() != n) throw ModelError("the graph has a cycle");
  return order;
}

}  // namespace

void assign_layers(ir::Graph& g, int depth) {
  if (depth < 0) throw ModelError("layer depth must be >= 0, got " + std::to_string(depth));
  std::vector<ir::Layer> layers;
  if (depth == 0) {
    for (size_t i = 0; i < g.nodes.size(); ++i) layers.push_back({g.nodes[i].name, {i}});
    g.set_layers(std::move(layers));
    return;
  }
  std::vector<GroupKey> groups;
  for (const auto& n : g.nodes) groups.push_back(group_of(n, depth));
  auto order = grouped_topo_order(g, groups);
  std::vector<ir::Node> nodes;
  std::vector<GroupKey> sorted_groups;
  for (size_t i : order) {
    nodes.push_back(std::move(g.nodes[i]));
    sorted_groups.push_back(groups[i]);
  }
  g.nodes = std::move(nodes);
  g.layers.clear();

  std::map<std::string, int> name_uses;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (i == 0 || sorted_groups[i].key != sorted_groups[i - 1].key) {
      std::string name = sorted_groups[i].name;
      int uses = ++name_uses[name];
      if (uses > 1) name.append("#").append(std::to_string(uses));
      layers.push_back({name, {}});
    }
    layers.back().nodes.push_back(i);
  }
  g.set_layers(std::move(layers));
}

}  // namespace pipetrain::importer::detail
