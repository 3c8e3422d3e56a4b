#include "partitioner/profile_ir.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/cost.h"
#include "ir/error.h"

namespace pipetrain::partitioner {

namespace {

bool is_matrix_op(const std::string& op) {
  return op == "Conv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul" || op == "LSTM";
}

void require_layers(const ir::Graph& g) {
  if (g.layers.empty()) throw ModelError("graph '" + g.name + "' has no layers to profile");
  for (const auto& n : g.nodes)
    if (n.layer < 0 || n.layer >= static_cast<int>(g.layers.size()))
      throw ModelError(n.describe() + " belongs to no layer");
}

/// Per node, the share of its time that goes to activation gradients: 1
/// for a backward node some gradient crossing a layer boundary depends on
/// (what a zero-bubble schedule's B op runs, for any cut), 0.5 for such a
/// convolution gradient that also makes weight gradients (split_backward
/// runs those halves apart: the two are the same FLOPs), 0 otherwise.
std::vector<double> input_gradient_share(const ir::Graph& g) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].backward)
      for (const auto& t : g.nodes[i].outputs)
        if (!t.empty()) producer[t] = i;
  std::vector<char> on_path(g.nodes.size(), 0);
  std::vector<size_t> todo;
  for (const auto& n : g.nodes) {
    if (!n.backward) continue;
    for (const auto& in : n.inputs) {
      auto it = producer.find(in);
      if (it != producer.end() && g.nodes[it->second].layer > n.layer) todo.push_back(it->second);
    }
  }
  while (!todo.empty()) {
    const size_t i = todo.back();
    todo.pop_back();
    if (on_path[i]) continue;
    on_path[i] = 1;
    for (const auto& in : g.nodes[i].inputs)
      if (auto it = producer.find(in); it != producer.end()) todo.push_back(it->second);
  }
  std::vector<double> share(g.nodes.size(), 0.0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!on_path[i]) continue;
    const ir::Node& n = g.nodes[i];
    const bool conv = n.op_type == "ConvGrad" || n.op_type == "ConvTransposeGrad";
    const bool weights_too = conv && (n.has_output(1) || n.has_output(2));
    share[i] = weights_too ? 0.5 : 1.0;
  }
  return share;
}

// Sets backward_s = 2 forward_s when the graph has no backward nodes.
void finish_backward(const ir::Graph& g, Profile& p) {
  bool any_backward =
      std::any_of(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) { return n.backward; });
  if (any_backward) return;
  for (auto& l : p.layers) l.backward_s = 2 * l.forward_s;
  p.backward_estimated = true;
}

}  // namespace

std::vector<int64_t> cut_bytes_per_layer(const ir::Graph& g) {
  require_layers(g);
  const int num_layers = static_cast<int>(g.layers.size());
  // Each activation crosses the cuts after layers [producer, last reader).
  // A difference array over cut positions keeps this linear in the tensors.
  std::vector<int64_t> delta(num_layers + 1, 0);
  std::map<std::string, int> producer_layer;
  for (const auto& n : g.nodes)
    if (!n.backward)
      for (const auto& out : n.outputs)
        if (!out.empty()) producer_layer[out] = n.layer;
  std::map<std::string, int> last_reader;
  for (const auto& n : g.nodes) {
    if (n.backward) continue;
    for (const auto& in : n.inputs) {
      auto it = producer_layer.find(in);
      if (in.empty() || it == producer_layer.end()) continue;
      if (n.layer < it->second)
        throw ModelError(n.describe() + " in layer '" + g.layers[n.layer].name + "' reads '" + in +
                         "' produced by the later layer '" + g.layers[it->second].name +
                         "': layers are not in a topological order");
      int& last = last_reader.try_emplace(in, it->second).first->second;
      last = std::max(last, n.layer);
    }
  }
  for (const auto& [name, last] : last_reader) {
    int first = producer_layer[name];
    if (last <= first) continue;
    auto bytes = static_cast<int64_t>(g.tensor(name).nbytes());
    delta[first] += bytes;
    delta[last] -= bytes;
  }
  std::vector<int64_t> cut(num_layers, 0);
  int64_t running = 0;
  for (int l = 0; l < num_layers; ++l) cut[l] = running += delta[l];
  return cut;
}

Profile structural_profile(const ir::Graph& g) {
  require_layers(g);
  Profile p;
  p.model = g.name;
  p.layers.resize(g.layers.size());
  auto consumers = g.consumers();
  std::map<std::string, size_t> producer;  // tensor -> node index
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& out : g.nodes[i].outputs)
      if (!out.empty()) producer[out] = i;
  // With backward nodes in the graph (a training graph), the stash is what
  // they read of the forward's tensors, at the first reader's layer (the
  // stage that keeps it, having made or received it); without, every
  // forward activation at its producer.
  const bool training =
      std::any_of(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) { return n.backward; });
  p.stash_at_readers = training;
  std::set<std::pair<int, int>> edges;
  for (size_t l = 0; l < g.layers.size(); ++l) {
    LayerProfile& lp = p.layers[l];
    lp.name = g.layers[l].name;
    std::set<std::string> params_seen;
    for (size_t idx : g.layers[l].nodes) {
      const ir::Node& n = g.nodes[idx];
      lp.nodes.push_back(n.name);
      if (n.backward) continue;
      for (const auto& in : n.inputs)
        if (!in.empty() && g.tensor(in).role == ir::Role::kParam && params_seen.insert(in).second)
          lp.param_bytes += static_cast<int64_t>(g.tensor(in).nbytes());
      for (const auto& out : n.outputs) {
        if (out.empty()) continue;
        // Without a backward graph: every forward activation, not only
        // those leaving the layer (graph.txt's activation_size when a layer
        // is one node).
        if (!training) lp.output_bytes += static_cast<int64_t>(g.tensor(out).nbytes());
        for (size_t c : consumers[out]) {
          const ir::Node& reader = g.nodes[c];
          if (!reader.backward && reader.layer != static_cast<int>(l))
            edges.emplace(static_cast<int>(l), reader.layer);
        }
      }
    }
  }
  // Data inputs at their first forward reader's layer.
  std::map<std::string, int> fed_at;
  for (const ir::Node& n : g.nodes)
    if (!n.backward && n.layer >= 0)
      for (const auto& in : n.inputs)
        if (!in.empty() && g.has_tensor(in) && g.tensor(in).role == ir::Role::kInput) {
          auto [slot, fresh] = fed_at.try_emplace(in, n.layer);
          slot->second = std::min(slot->second, n.layer);
        }
  for (const auto& [name, layer] : fed_at)
    p.layers[static_cast<size_t>(layer)].input_bytes +=
        static_cast<int64_t>(g.tensor(name).nbytes());
  if (training) {
    // Zero-bubble carry: tensors the input part (B) makes that the weight
    // part (W) reads, at the layer of their last W reader.
    const std::vector<double> share = input_gradient_share(g);
    std::map<std::string, int> carried;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      if (!n.backward || share[i] >= 1.0 || n.layer < 0) continue;  // no W part
      for (const auto& in : n.inputs) {
        auto it = producer.find(in);
        if (it == producer.end() || share[it->second] <= 0.0) continue;
        auto [slot, fresh] = carried.try_emplace(in, n.layer);
        slot->second = std::max(slot->second, n.layer);
      }
    }
    for (const auto& [name, layer] : carried)
      p.layers[static_cast<size_t>(layer)].carry_bytes +=
          static_cast<int64_t>(g.tensor(name).nbytes());
    // Forward nodes' outputs at the layer of their first backward reader
    // (data inputs are fed again to the backward, not stashed).
    std::map<std::string, std::pair<int, int>> readers;  // first and last reader layer
    for (const ir::Node& n : g.nodes)
      if (n.backward && n.layer >= 0)
        for (const auto& in : n.inputs) {
          if (in.empty() || !g.has_tensor(in)) continue;
          const ir::TensorDesc& d = g.tensor(in);
          if (d.role != ir::Role::kActivation || g.has_value(in)) continue;
          bool forward = false;  // produced by a forward node
          auto it = producer.find(in);
          if (it != producer.end()) forward = !g.nodes[it->second].backward;
          if (!forward) continue;
          auto [slot, fresh] = readers.try_emplace(in, n.layer, n.layer);
          slot->second.first = std::min(slot->second.first, n.layer);
          slot->second.second = std::max(slot->second.second, n.layer);
        }
    // Of those, what a weight part (a node not all input gradient) reads,
    // with the layers of its weight readers.
    std::map<std::string, std::set<int>> weight_readers;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].backward && share[i] < 1.0 && g.nodes[i].layer >= 0)
        for (const auto& in : g.nodes[i].inputs)
          if (readers.count(in)) weight_readers[in].insert(g.nodes[i].layer);
    p.weight_reads_known = true;
    for (const auto& [name, layers] : weight_readers) {
      const auto [first, last] = readers.at(name);
      p.weight_reads.push_back({name, static_cast<int64_t>(g.tensor(name).nbytes()), first, last,
                                std::vector<int>(layers.begin(), layers.end())});
    }
    // A stage starting after layer c whose first reader lies at or before c
    // and last after it keeps the tensor too (received): cut_stash_bytes
    // for every c in [first, last).
    std::vector<int64_t> delta(p.layers.size() + 1, 0);
    for (const auto& [name, range] : readers) {
      const auto bytes = static_cast<int64_t>(g.tensor(name).nbytes());
      p.layers[static_cast<size_t>(range.first)].output_bytes += bytes;
      delta[static_cast<size_t>(range.first)] += bytes;
      delta[static_cast<size_t>(range.second)] -= bytes;
    }
    int64_t running = 0;
    for (size_t l = 0; l < p.layers.size(); ++l) p.layers[l].cut_stash_bytes = running += delta[l];
  }
  // Params read by forward nodes of several layers: tied weights.
  std::map<std::string, std::set<int>> readers;
  for (const ir::Node& n : g.nodes)
    if (!n.backward && n.layer >= 0)
      for (const auto& in : n.inputs)
        if (!in.empty() && g.tensor(in).role == ir::Role::kParam) readers[in].insert(n.layer);
  for (const auto& [name, layers] : readers)
    if (layers.size() > 1)
      p.tied.push_back({name, static_cast<int64_t>(g.tensor(name).nbytes()),
                        std::vector<int>(layers.begin(), layers.end())});
  auto cut = cut_bytes_per_layer(g);
  for (size_t l = 0; l < cut.size(); ++l) p.layers[l].cut_bytes = cut[l];
  p.edges.assign(edges.begin(), edges.end());
  for (const auto& in : g.inputs)
    if (g.has_tensor(in) && !g.tensor(in).shape.empty()) {
      p.batch = g.tensor(in).shape[0];
      break;
    }
  return p;
}

Profile analytic_profile(const ir::Graph& g, const DeviceSpec& device,
                         const AnalyticOptions& options) {
  Profile p = structural_profile(g);
  p.source = "analytic";
  p.device = device.name;
  for (const auto& n : g.nodes) {
    double flops = static_cast<double>(ir::node_flops(g, n));
    double bytes = 0;
    for (const auto& t : n.inputs)
      if (!t.empty()) bytes += static_cast<double>(g.tensor(t).nbytes());
    for (const auto& t : n.outputs)
      if (!t.empty()) bytes += static_cast<double>(g.tensor(t).nbytes());
    double peak = device.peak_fp32_flops;
    if (options.tf32 && device.peak_tf32_flops > 0 && is_matrix_op(n.op_type))
      peak = device.peak_tf32_flops;
    double t = device.kernel_overhead_s + std::max(flops / peak, bytes / device.memory_bandwidth);
    LayerProfile& lp = p.layers[n.layer];
    (n.backward ? lp.backward_s : lp.forward_s) += t;
  }
  finish_backward(g, p);
  return p;
}

Profile measured_profile(const ir::Graph& g, const NodeTimer& run_once, int warmup, int runs,
                         const std::string& device) {
  if (runs < 1) throw PlanError("measured profile: need at least one timed run");
  Profile p = structural_profile(g);
  p.source = "measured";
  p.device = device;
  std::vector<std::vector<double>> samples(g.nodes.size());
  std::vector<double> node_seconds;
  for (int r = 0; r < warmup + runs; ++r) {
    node_seconds.assign(g.nodes.size(), 0.0);
    run_once(node_seconds);
    if (r < warmup) continue;
    for (size_t i = 0; i < g.nodes.size(); ++i) samples[i].push_back(node_seconds[i]);
  }
  const std::vector<double> share = input_gradient_share(g);
  const bool any_backward =
      std::any_of(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) { return n.backward; });
  if (any_backward)
    for (auto& l : p.layers) l.backward_input_s = 0.0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto& s = samples[i];
    std::sort(s.begin(), s.end());
    // Median; the mean of the two middle values for an even count.
    double median = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
    LayerProfile& lp = p.layers[g.nodes[i].layer];
    (g.nodes[i].backward ? lp.backward_s : lp.forward_s) += median;
    if (g.nodes[i].backward) lp.backward_input_s += share[i] * median;
  }
  finish_backward(g, p);
  return p;
}

}  // namespace pipetrain::partitioner
