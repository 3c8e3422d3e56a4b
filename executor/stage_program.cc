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

/// Param -> the stages whose nodes read it (more than one: tied weights).
std::map<std::string, std::set<int>> param_readers(const ir::Graph& g,
                                                   const std::vector<int>& stage) {
  std::map<std::string, std::set<int>> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty() && g.has_value(in) && g.tensor(in).role == ir::Role::kParam)
        readers[in].insert(stage[i]);
  return readers;
}

/// The gradient contributions autodiff summed into `grad` (its chain of
/// `<param>_grad/Sum_k` Adds), in summation order, and the chain's nodes.
std::vector<std::string> gradient_parts(const ir::Graph& g, const std::string& param,
                                        const std::string& grad, std::set<size_t>* chain) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& t : g.nodes[i].outputs)
      if (!t.empty()) producer[t] = i;
  std::vector<std::string> parts;
  std::string t = grad;
  for (;;) {
    auto it = producer.find(t);
    const ir::Node* n = it == producer.end() ? nullptr : &g.nodes[it->second];
    if (!n || n->op_type != "Add" || n->name.rfind(param + "_grad/Sum_", 0) != 0) break;
    chain->insert(it->second);
    parts.push_back(n->inputs[1]);
    t = n->inputs[0];
  }
  parts.push_back(t);
  return {parts.rbegin(), parts.rend()};
}

/// Tied weights: every stage that reads a shared param keeps a copy and sums
/// its own gradient contributions into "<param>_grad@stage<s>"; the pipeline
/// then sums those partial gradients across the sharing stages before each
/// update (so the copies stay equal). Rewrites g's backward accordingly and
/// returns param -> (stage -> its partial gradient).
std::map<std::string, std::map<int, std::string>> split_tied_gradients(
    ir::Graph& g, const autodiff::TrainingGraph& tg, std::vector<int>& stage,
    const std::map<std::string, std::set<int>>& readers) {
  std::map<std::string, std::map<int, std::string>> partials;
  std::set<size_t> removed;
  std::vector<ir::Node> added;
  std::vector<int> added_stage;
  for (const auto& [param, stages] : readers) {
    if (stages.size() < 2) continue;
    auto grad = tg.grads.find(param);
    if (grad == tg.grads.end()) continue;  // not trained: every copy stays as loaded
    std::set<size_t> chain;
    const auto parts = gradient_parts(g, param, grad->second, &chain);
    removed.insert(chain.begin(), chain.end());
    std::map<int, std::vector<std::string>> by_stage;  // stage -> its parts, in order
    std::map<int, int> layer_of;                       // stage -> layer of its first part
    std::map<std::string, size_t> producer;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (const auto& t : g.nodes[i].outputs)
        if (!t.empty()) producer[t] = i;
    for (const auto& part : parts) {
      auto it = producer.find(part);
      if (it == producer.end())
        throw PlanError("the gradient of tied param '" + param + "' has a part '" + part +
                        "' that no node computes");
      const int s = stage[it->second];
      by_stage[s].push_back(part);
      layer_of.emplace(s, g.nodes[it->second].layer);
    }
    for (int s : stages)
      if (!by_stage.count(s))
        throw PlanError("param '" + param + "' is read on stage " + std::to_string(s) +
                        " but no gradient reaches it there; tied copies must all be trained");
    for (const auto& [s, list] : by_stage) {
      const std::string out = param + "_grad@stage" + std::to_string(s);
      std::string acc = list[0];
      const ir::TensorDesc d = g.tensor(list[0]);
      if (list.size() == 1) {
        // One part: an Identity names the stage's partial gradient.
        added.push_back({param + "_grad/stage" + std::to_string(s) + "/Identity",
                         "Identity",
                         {acc},
                         {out},
                         {},
                         layer_of[s],
                         true});
        added_stage.push_back(s);
      }
      for (size_t k = 1; k < list.size(); ++k) {
        const std::string sum = k + 1 == list.size() ? out
                                                     : param + "_grad@stage" + std::to_string(s) +
                                                           "/sum_" + std::to_string(k);
        added.push_back({param + "_grad/stage" + std::to_string(s) + "/Sum_" + std::to_string(k),
                         "Add",
                         {acc, list[k]},
                         {sum},
                         {},
                         layer_of[s],
                         true});
        added_stage.push_back(s);
        g.set_tensor({sum, d.dtype, d.shape, ir::Role::kGrad});
        acc = sum;
      }
      g.set_tensor({out, d.dtype, d.shape, ir::Role::kGrad});
      partials[param][s] = out;
    }
    auto& outs = g.outputs;
    outs.erase(std::remove(outs.begin(), outs.end(), grad->second), outs.end());
    for (const auto& [s, out] : partials[param]) outs.push_back(out);
  }
  if (partials.empty()) return partials;
  // Rebuild the node list without the removed chains, the new sums appended,
  // and the layers' node lists from each node's layer.
  std::vector<ir::Node> nodes;
  std::vector<int> stages;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed.count(i)) {
      nodes.push_back(std::move(g.nodes[i]));
      stages.push_back(stage[i]);
    }
  for (size_t k = 0; k < added.size(); ++k) {
    nodes.push_back(std::move(added[k]));
    stages.push_back(added_stage[k]);
  }
  g.nodes = std::move(nodes);
  stage = std::move(stages);
  std::vector<ir::Layer> layers = g.layers;
  for (auto& l : layers) l.nodes.clear();
  for (size_t i = 0; i < g.nodes.size(); ++i)
    layers[static_cast<size_t>(g.nodes[i].layer)].nodes.push_back(i);
  g.set_layers(std::move(layers));
  return partials;
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

void split_backward(StageProgram& prog) {
  const ir::Graph& g = prog.backward;
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& t : g.nodes[i].outputs)
      if (!t.empty()) producer[t] = i;
  // The input part: every node a sent gradient depends on.
  std::vector<bool> in_b(g.nodes.size(), false);
  std::vector<std::string> todo;
  for (const auto& tr : prog.send_bwd) todo.push_back(tr.tensor);
  while (!todo.empty()) {
    const std::string t = todo.back();
    todo.pop_back();
    auto it = producer.find(t);
    if (it == producer.end() || in_b[it->second]) continue;
    in_b[it->second] = true;
    for (const auto& in : g.nodes[it->second].inputs)
      if (!in.empty()) todo.push_back(in);
  }
  // Tensors the input part must produce: what it sends and what its own nodes read.
  std::set<std::string> b_needs;
  for (const auto& tr : prog.send_bwd) b_needs.insert(tr.tensor);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (in_b[i])
      for (const auto& in : g.nodes[i].inputs) b_needs.insert(in);
  // Nodes of each part; a convolution gradient in the input part gives its
  // weight and bias gradients to a copy in the weight part, run where the
  // original stood.
  ir::Graph split = g;  // node copies appended; values shared
  SubgraphSpec b_spec, w_spec;
  std::vector<std::pair<size_t, size_t>> w_order;  // (position, node)
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!in_b[i]) {
      w_order.emplace_back(i, i);
      continue;
    }
    b_spec.nodes.push_back(i);
    const ir::Node& n = g.nodes[i];
    const bool separable = n.op_type == "ConvGrad" || n.op_type == "ConvTransposeGrad";
    bool moves = false;
    for (size_t k = 1; k < n.outputs.size(); ++k)
      moves = moves || (!n.outputs[k].empty() && !b_needs.count(n.outputs[k]));
    if (!separable || !moves || n.outputs[0].empty() || !b_needs.count(n.outputs[0])) continue;
    ir::Node weight_part = n;
    weight_part.outputs[0].clear();
    weight_part.name += "/weight";
    for (size_t k = 1; k < n.outputs.size(); ++k) split.nodes[i].outputs[k].clear();
    w_order.emplace_back(i, split.nodes.size());
    split.nodes.push_back(std::move(weight_part));
  }
  std::sort(w_order.begin(), w_order.end());
  for (const auto& [pos, node] : w_order) w_spec.nodes.push_back(node);

  auto made_by = [&](const SubgraphSpec& spec) {
    std::set<std::string> made;
    for (size_t i : spec.nodes)
      for (const auto& t : split.nodes[i].outputs)
        if (!t.empty()) made.insert(t);
    return made;
  };
  auto read_by = [&](const SubgraphSpec& spec) {
    std::set<std::string> reads;
    for (size_t i : spec.nodes)
      for (const auto& t : split.nodes[i].inputs)
        if (!t.empty()) reads.insert(t);
    return reads;
  };
  const std::set<std::string> b_made = made_by(b_spec), w_reads = read_by(w_spec);
  const std::set<std::string> b_reads = read_by(b_spec);
  // Carried from the input part to the weight part: what the weight part
  // reads of it, and backward outputs (param gradients) it computed. Not
  // the gradients it sends upstream, unless the weight part reads them:
  // kept until W, each was a second copy of an activation-sized tensor per
  // microbatch in flight.
  std::set<std::string> sent;
  for (const auto& tr : prog.send_bwd) sent.insert(tr.tensor);
  prog.carry.clear();
  for (size_t i : w_spec.nodes)
    for (const auto& in : split.nodes[i].inputs)
      if (b_made.count(in)) add_once(prog.carry, in);
  for (const auto& out : g.outputs)
    if (b_made.count(out) && !sent.count(out)) add_once(prog.carry, out);
  for (const auto& in : g.inputs) {
    if (b_reads.count(in)) b_spec.inputs.push_back(in);
    if (w_reads.count(in)) w_spec.inputs.push_back(in);
  }
  for (const auto& c : prog.carry)
    if (w_reads.count(c)) w_spec.inputs.push_back(c);
  for (const auto& tr : prog.send_bwd) add_once(b_spec.outputs, tr.tensor);
  for (const auto& c : prog.carry) add_once(b_spec.outputs, c);
  for (const auto& out : g.outputs)
    if (!b_made.count(out)) w_spec.outputs.push_back(out);
  const int last = static_cast<int>(g.layers.size()) - 1;
  prog.backward_input = make_subgraph(split, b_spec, 0, last, g.name + "/input");
  prog.backward_weight = make_subgraph(split, w_spec, 0, last, g.name + "/weight");
  prog.backward_input.verify();
  prog.backward_weight.verify();
}

std::vector<StageProgram> build_stage_programs(
    const autodiff::TrainingGraph& tg, const std::vector<std::pair<int, int>>& stage_layers) {
  ir::Graph g = tg.graph;  // values shared; tied weights rewrite the backward
  const std::vector<int> stage_of = layer_to_stage(stage_layers, static_cast<int>(g.layers.size()));
  std::vector<int> stage = node_stages(g, stage_of);
  const auto readers = param_readers(g, stage);
  const auto partials = split_tied_gradients(g, tg, stage, readers);
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
    auto own = readers.find(param);
    if (own == readers.end()) continue;
    if (auto tied = partials.find(param); tied != partials.end()) {
      const std::vector<int> sharing(own->second.begin(), own->second.end());
      for (const auto& [s, partial] : tied->second) {
        programs[static_cast<size_t>(s)].grads[param] = partial;
        programs[static_cast<size_t>(s)].shared[param] = sharing;
      }
      continue;
    }
    auto it = origin.find(grad);
    if (it == origin.end()) continue;
    const int owner = *own->second.begin();
    if (it->second.stage != owner)
      throw PlanError("the gradient of param '" + param + "' is computed on stage " +
                      std::to_string(it->second.stage) + " but the param lives on stage " +
                      std::to_string(owner));
    programs[static_cast<size_t>(owner)].grads[param] = grad;
  }
  for (const auto& [param, stages] : readers)
    for (int s : stages) programs[static_cast<size_t>(s)].params.push_back(param);

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
