#include "executor/stage_program.h"

#include <algorithm>
#include <array>
#include <set>

#include "ir/error.h"

namespace pipetrain::exec {

namespace {

enum Phase { kForward = 0, kBackward = 1 };

/// Where a tensor is computed: the stage and the phase of its producer.
struct Origin {
  int stage;
  Phase phase;
};

/// Appends `name` to `list` unless it is there already (keeps first-seen order).
void add_once(std::vector<std::string>& list, const std::string& name) {
  if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
}

/// Maps each layer to its stage after checking that the ranges are contiguous
/// from layer 0 and cover all `num_layers` layers.
std::vector<int> layer_to_stage(const std::vector<std::pair<int, int>>& stage_layers,
                                int num_layers) {
  if (stage_layers.empty()) throw PlanError("a pipeline needs at least one stage");
  std::vector<int> stage_of(static_cast<size_t>(num_layers), -1);
  int next = 0;
  for (size_t s = 0; s < stage_layers.size(); ++s) {
    auto [first, last] = stage_layers[s];
    if (first != next || last < first || last >= num_layers)
      throw PlanError("stage " + std::to_string(s) + " covers layers [" + std::to_string(first) +
                      ", " + std::to_string(last) + "] but must start at layer " +
                      std::to_string(next) + " and end before layer " + std::to_string(num_layers) +
                      " (stages are contiguous layer ranges)");
    for (int l = first; l <= last; ++l) stage_of[static_cast<size_t>(l)] = static_cast<int>(s);
    next = last + 1;
  }
  if (next != num_layers)
    throw PlanError("the stages cover layers 0.." + std::to_string(next - 1) +
                    " but the graph has " + std::to_string(num_layers) + " layers");
  return stage_of;
}

/// The stage every node runs on.
std::vector<int> node_stages(const ir::Graph& g, const std::vector<int>& stage_of) {
  std::vector<int> stage(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    int layer = g.nodes[i].layer;
    if (layer < 0 || static_cast<size_t>(layer) >= stage_of.size())
      throw PlanError(g.nodes[i].describe() + ": belongs to no layer, so to no stage");
    stage[i] = stage_of[static_cast<size_t>(layer)];
  }
  return stage;
}

/// Param -> owning stage. A param read by nodes of two stages (tied weights)
/// would need its gradient summed and its updates mirrored across stages,
/// which the pipeline does not do: refuse it.
std::map<std::string, int> param_owners(const ir::Graph& g, const std::vector<int>& stage) {
  std::map<std::string, std::set<int>> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty() && g.has_value(in) && g.tensor(in).role == ir::Role::kParam)
        readers[in].insert(stage[i]);
  std::map<std::string, int> owner;
  for (const auto& [param, stages] : readers) {
    if (stages.size() > 1) {
      std::string list;
      for (int s : stages) list += (list.empty() ? "" : ", ") + std::to_string(s);
      throw PlanError("param '" + param + "' is read by stages " + list +
                      " (tied weights): each param must live in one stage; put its readers' "
                      "layers in one stage");
    }
    owner[param] = *stages.begin();
  }
  return owner;
}

/// What one subgraph reads from outside and must produce.
struct SubgraphSpec {
  std::vector<size_t> nodes;  // indices into the training graph, in its order
  std::vector<std::string> inputs, outputs;
};

/// Copies the nodes of `spec` into a graph of their own: descriptors of every
/// tensor they touch, the values they read (sharing buffers), one layer per
/// layer of the stage (possibly empty) so the layer structure survives.
ir::Graph make_subgraph(const ir::Graph& g, const SubgraphSpec& spec, int first_layer,
                        int last_layer, const std::string& name) {
  ir::Graph sub;
  sub.name = name;
  sub.opset = g.opset;
  std::vector<ir::Layer> layers;
  for (int l = first_layer; l <= last_layer; ++l)
    layers.push_back({g.layers[static_cast<size_t>(l)].name, {}});
  for (size_t i : spec.nodes) {
    const ir::Node& n = g.nodes[i];
    for (const auto& t : n.inputs) {
      if (t.empty() || sub.has_tensor(t)) continue;
      if (const ir::Tensor* v = g.value(t))
        sub.set_value(t, *v, g.tensor(t).role);
      else
        sub.set_tensor(g.tensor(t));
    }
    for (const auto& t : n.outputs)
      if (!t.empty()) sub.set_tensor(g.tensor(t));
    layers[static_cast<size_t>(n.layer - first_layer)].nodes.push_back(sub.nodes.size());
    sub.nodes.push_back(n);
  }
  for (const auto& t : spec.inputs) sub.set_tensor(g.tensor(t));
  sub.inputs = spec.inputs;
  sub.outputs = spec.outputs;
  sub.set_layers(std::move(layers));
  return sub;
}

}  // namespace

std::vector<StageProgram> build_stage_programs(
    const autodiff::TrainingGraph& tg, const std::vector<std::pair<int, int>>& stage_layers) {
  const ir::Graph& g = tg.graph;
  const std::vector<int> stage_of = layer_to_stage(stage_layers, static_cast<int>(g.layers.size()));
  const std::vector<int> stage = node_stages(g, stage_of);
  const std::map<std::string, int> owner = param_owners(g, stage);
  const int num_stages = static_cast<int>(stage_layers.size());
  const std::set<std::string> graph_inputs(g.inputs.begin(), g.inputs.end());

  std::map<std::string, Origin> origin;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& t : g.nodes[i].outputs)
      if (!t.empty()) origin[t] = {stage[i], g.nodes[i].backward ? kBackward : kForward};

  std::vector<StageProgram> programs(static_cast<size_t>(num_stages));
  // specs[s][phase]
  std::vector<std::array<SubgraphSpec, 2>> specs(static_cast<size_t>(num_stages));
  // All transfers by phase, in the order their first reader is met; the
  // (tensor, to_stage) set makes a tensor read twice by one stage one transfer.
  std::vector<Transfer> transfers[2];
  std::set<std::pair<std::string, int>> seen;

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const int s = stage[i];
    const Phase phase = g.nodes[i].backward ? kBackward : kForward;
    StageProgram& prog = programs[static_cast<size_t>(s)];
    SubgraphSpec& spec = specs[static_cast<size_t>(s)][phase];
    spec.nodes.push_back(i);
    for (const auto& t : g.nodes[i].inputs) {
      if (t.empty() || g.has_value(t)) continue;
      if (graph_inputs.count(t)) {
        add_once(spec.inputs, t);
        add_once(prog.inputs, t);
        continue;
      }
      const Origin& o = origin.at(t);                  // verify() guaranteed a producer
      if (o.stage == s && o.phase == phase) continue;  // local to this subgraph
      if (o.phase == kBackward && phase == kForward)
        throw PlanError(g.nodes[i].describe() + ": forward node reads '" + t +
                        "', which a backward node computes");
      add_once(spec.inputs, t);
      // A backward subgraph reading a forward-phase tensor keeps it per microbatch.
      if (phase == kBackward && o.phase == kForward) add_once(prog.stash, t);
      if (o.stage == s) {
        // Own forward -> own backward: the forward subgraph must output it.
        add_once(specs[static_cast<size_t>(s)][kForward].outputs, t);
        continue;
      }
      if (seen.insert({t, s}).second) {
        transfers[o.phase].push_back({t, o.stage, s});
        add_once(specs[static_cast<size_t>(o.stage)][o.phase].outputs, t);
      }
    }
  }

  // The training graph's own outputs: loss, buffer updates, param gradients.
  for (const auto& out : g.outputs) {
    auto it = origin.find(out);
    if (it == origin.end()) continue;  // an input or a value: nothing to compute
    add_once(specs[static_cast<size_t>(it->second.stage)][it->second.phase].outputs, out);
    if (it->second.phase == kForward)
      programs[static_cast<size_t>(it->second.stage)].results.push_back(out);
  }
  for (const auto& [param, grad] : tg.grads) {
    auto own = owner.find(param);
    auto it = origin.find(grad);
    if (own == owner.end() || it == origin.end()) continue;
    if (it->second.stage != own->second)
      throw PlanError("the gradient of param '" + param + "' is computed on stage " +
                      std::to_string(it->second.stage) + " but the param lives on stage " +
                      std::to_string(own->second));
    programs[static_cast<size_t>(own->second)].grads[param] = grad;
  }
  for (const auto& [param, s] : owner) programs[static_cast<size_t>(s)].params.push_back(param);

  for (int p = 0; p < 2; ++p)
    for (const Transfer& tr : transfers[p]) {
      auto& from = programs[static_cast<size_t>(tr.from_stage)];
      auto& to = programs[static_cast<size_t>(tr.to_stage)];
      (p == kForward ? from.send_fwd : from.send_bwd).push_back(tr);
      (p == kForward ? to.recv_fwd : to.recv_bwd).push_back(tr);
    }

  for (int s = 0; s < num_stages; ++s) {
    StageProgram& prog = programs[static_cast<size_t>(s)];
    prog.stage = s;
    prog.first_layer = stage_layers[static_cast<size_t>(s)].first;
    prog.last_layer = stage_layers[static_cast<size_t>(s)].second;
    // Graph inputs in graph order, whatever order the nodes met them in.
    std::vector<std::string> ordered;
    for (const auto& in : g.inputs)
      if (std::find(prog.inputs.begin(), prog.inputs.end(), in) != prog.inputs.end())
        ordered.push_back(in);
    prog.inputs = std::move(ordered);
    const std::string base = g.name + "/stage" + std::to_string(s);
    const auto& spec = specs[static_cast<size_t>(s)];
    prog.forward =
        make_subgraph(g, spec[kForward], prog.first_layer, prog.last_layer, base + "/forward");
    prog.backward =
        make_subgraph(g, spec[kBackward], prog.first_layer, prog.last_layer, base + "/backward");
    prog.forward.verify();
    prog.backward.verify();
  }
  return programs;
}

}  // namespace pipetrain::exec
