// The machinery of the fusion passes (fusion.cc, attention_fusion.cc): who
// reads what, and a pass's edits applied at once, so a rewrite keeps the
// node order the partitioner's layers follow.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace pipetrain::ir::passes::detail {

/// Who reads and writes what, taken once per pass (patterns never overlap
/// within one pass: a matched node is claimed).
struct Uses {
  explicit Uses(const Graph& g)
      : consumers(g.consumers()),
        producers(g.producers()),
        outputs(g.outputs.begin(), g.outputs.end()) {}
  std::map<std::string, std::vector<size_t>> consumers;
  std::map<std::string, size_t> producers;
  std::set<std::string> outputs;

  /// `t` is an intermediate read by `node` alone (so it may disappear).
  bool only_reader(const std::string& t, size_t node) const {
    if (outputs.count(t)) return false;
    auto it = consumers.find(t);
    return it != consumers.end() && it->second.size() == 1 && it->second[0] == node;
  }
  /// The single node reading intermediate `t`, if there is one.
  std::optional<size_t> sole_reader(const std::string& t) const {
    if (outputs.count(t)) return std::nullopt;
    auto it = consumers.find(t);
    if (it == consumers.end() || it->second.size() != 1) return std::nullopt;
    return it->second[0];
  }
  std::optional<size_t> producer(const std::string& t) const {
    auto it = producers.find(t);
    if (it == producers.end()) return std::nullopt;
    return it->second;
  }
};

/// The f32 value of a one-element constant (or param) input.
inline std::optional<float> scalar(const Graph& g, const std::string& t) {
  const Tensor* v = g.value(t);
  if (!v || v->numel() != 1 || v->dtype() != DType::kF32) return std::nullopt;
  return v->data<float>()[0];
}

inline bool near(std::optional<float> v, double want) {
  return v && std::abs(*v - want) <= 1e-6 * std::abs(want);
}

/// Node `i`'s input other than `t` (a binary op), or "" when `t` is not one of them.
inline std::string other_input(const Node& n, const std::string& t) {
  if (n.inputs.size() != 2) return "";
  if (n.inputs[0] == t) return n.inputs[1];
  if (n.inputs[1] == t) return n.inputs[0];
  return "";
}

inline std::string unique_node_name(const Graph& g, const std::set<std::string>& taken,
                             const std::string& base) {
  auto used = [&](const std::string& s) {
    return taken.count(s) || std::any_of(g.nodes.begin(), g.nodes.end(),
                                         [&](const Node& n) { return n.name == s; });
  };
  std::string name = base;
  for (int k = 2; used(name); ++k) name = base + "_" + std::to_string(k);
  return name;
}

inline std::string unique_tensor_name(const Graph& g, const std::string& base) {
  std::string name = base;
  for (int k = 2; g.has_tensor(name); ++k) name = base + "_" + std::to_string(k);
  return name;
}

/// A pass's edits: nodes to drop, and replacements emitted where their
/// anchor (the last node of the matched pattern) stood, so the node order
/// (and with it the layers the partitioner cuts) stays as the file had it.
struct Rewrite {
  std::set<size_t> dead;
  std::map<size_t, std::vector<Node>> at;
  std::set<std::string> new_names;
  std::map<std::string, std::string> alias;  // a dropped node's output -> what readers read instead
  bool claimed(size_t i) const { return dead.count(i) != 0; }
  void replace(const std::vector<size_t>& pattern, std::vector<Node> nodes) {
    for (const auto& n : nodes) new_names.insert(n.name);
    dead.insert(pattern.begin(), pattern.end());
    at[*std::max_element(pattern.begin(), pattern.end())] = std::move(nodes);
  }
  void apply(Graph& g) {
    if (dead.empty()) return;
    std::set<std::string> produced;
    for (const auto& [i, nodes] : at)
      for (const auto& n : nodes) produced.insert(n.outputs.begin(), n.outputs.end());
    std::vector<Node> kept;
    std::set<std::string> gone;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (!dead.count(i)) {
        kept.push_back(std::move(g.nodes[i]));
        continue;
      }
      for (const auto& o : g.nodes[i].outputs)
        if (!o.empty() && !produced.count(o)) gone.insert(o);
      if (auto it = at.find(i); it != at.end())
        for (auto& n : it->second) kept.push_back(std::move(n));
    }
    for (auto& n : kept)
      for (auto& in : n.inputs)
        for (auto it = alias.find(in); it != alias.end(); it = alias.find(in)) in = it->second;
    g.nodes = std::move(kept);
    for (const auto& t : gone) g.erase_tensor(t);
    g.layers.clear();  // node indices moved; the importer assigns layers afterwards
  }
};

/// Runs `match(i, uses, rw)` on every node not yet claimed (true: it
/// matched a pattern there and recorded the rewrite) and applies the edits.
template <typename Match>
int run_pass(Graph& g, Match match) {
  const Uses uses(g);
  Rewrite rw;
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!rw.claimed(i) && match(i, uses, rw)) ++count;
  rw.apply(g);
  return count;
}

}  // namespace pipetrain::ir::passes::detail
