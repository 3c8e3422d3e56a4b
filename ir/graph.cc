#include "ir/graph.h"

#include <algorithm>
#include <queue>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain::ir {

const char* role_name(Role r) {
  switch (r) {
    case Role::kInput: return "input";
    case Role::kParam: return "param";
    case Role::kBuffer: return "buffer";
    case Role::kConstant: return "constant";
    case Role::kActivation: return "activation";
    case Role::kGrad: return "grad";
    case Role::kOptimizerState: return "optimizer_state";
  }
  return "?";
}

TensorDesc& Graph::set_tensor(TensorDesc desc) {
  std::string key = desc.name;
  return tensors_[key] = std::move(desc);
}

const TensorDesc& Graph::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw ModelError("tensor '" + name + "' is not defined in the graph");
  return it->second;
}

TensorDesc& Graph::tensor(const std::string& name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw ModelError("tensor '" + name + "' is not defined in the graph");
  return it->second;
}

void Graph::erase_tensor(const std::string& name) {
  tensors_.erase(name);
  values_.erase(name);
}

void Graph::set_value(const std::string& name, Tensor value, Role role) {
  set_tensor({name, value.dtype(), value.shape(), role});
  values_[name] = std::move(value);
}

const Tensor* Graph::value(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

Tensor* Graph::mutable_value(const std::string& name) {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

std::vector<std::string> Graph::params() const {
  std::vector<std::string> r;
  for (const auto& [name, d] : tensors_)
    if (d.role == Role::kParam) r.push_back(name);
  return r;
}

int64_t Graph::param_count() const {
  int64_t n = 0;
  for (const auto& [name, d] : tensors_)
    if (d.role == Role::kParam) n += numel(d.shape);
  return n;
}

std::map<std::string, size_t> Graph::producers() const {
  std::map<std::string, size_t> p;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& o : nodes[i].outputs)
      if (!o.empty()) p[o] = i;
  return p;
}

std::map<std::string, std::vector<size_t>> Graph::consumers() const {
  std::map<std::string, std::vector<size_t>> c;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& in : nodes[i].inputs)
      if (!in.empty()) c[in].push_back(i);
  return c;
}

std::vector<size_t> Graph::topo_order() const {
  auto prod = producers();
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> users(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<size_t> deps;
    for (const auto& in : nodes[i].inputs) {
      if (in.empty()) continue;
      auto it = prod.find(in);
      if (it != prod.end()) {
        deps.insert(it->second);
      } else if (!has_value(in) && std::find(inputs.begin(), inputs.end(), in) == inputs.end()) {
        throw ModelError(nodes[i].describe() + ": input '" + in +
                         "' is neither a graph input, an initializer nor produced by a node");
      }
    }
    for (size_t d : deps) users[d].push_back(i);
    pending[i] = static_cast<int>(deps.size());
  }
  // Min-heap on the original index keeps file order where dependencies allow.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if (order.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (pending[i] > 0) throw ModelError(nodes[i].describe() + ": is part of a cycle");
  }
  return order;
}

void Graph::sort_topologically() {
  auto order = topo_order();
  std::vector<size_t> new_index(nodes.size());
  std::vector<Node> sorted;
  sorted.reserve(nodes.size());
  for (size_t k = 0; k < order.size(); ++k) {
    new_index[order[k]] = k;
    sorted.push_back(std::move(nodes[order[k]]));
  }
  nodes = std::move(sorted);
  for (auto& layer : layers) {
    for (auto& idx : layer.nodes) idx = new_index[idx];
    std::sort(layer.nodes.begin(), layer.nodes.end());
  }
}

void Graph::infer_shapes() {
  for (size_t i : topo_order()) {
    const Node& n = nodes[i];
    auto outs = infer_node(*this, n);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k].empty()) continue;
      auto it = tensors_.find(n.outputs[k]);
      Role role = it != tensors_.end() && it->second.role != Role::kActivation ? it->second.role
                                                                               : Role::kActivation;
      set_tensor({n.outputs[k], outs[k].first, outs[k].second, role});
    }
  }
}

void Graph::set_layers(std::vector<Layer> new_layers) {
  layers = std::move(new_layers);
  for (auto& n : nodes) n.layer = -1;
  for (size_t l = 0; l < layers.size(); ++l)
    for (size_t idx : layers[l].nodes) nodes.at(idx).layer = static_cast<int>(l);
}

void Graph::verify() const {
  std::set<std::string> names;
  for (const auto& n : nodes) {
    if (n.name.empty()) throw ModelError("a " + n.op_type + " node has no name");
    if (!names.insert(n.name).second) throw ModelError("node name '" + n.name + "' is not unique");
  }
  std::set<std::string> produced;
  for (const auto& n : nodes)
    for (const auto& o : n.outputs) {
      if (o.empty()) continue;
      if (!produced.insert(o).second)
        throw ModelError(n.describe() + ": output '" + o + "' is produced twice");
      if (has_value(o))
        throw ModelError(n.describe() + ": output '" + o + "' overwrites a constant value");
    }
  for (const auto& in : inputs) {
    if (!has_tensor(in)) throw ModelError("graph input '" + in + "' has no descriptor");
    if (produced.count(in)) throw ModelError("graph input '" + in + "' is also produced by a node");
  }
  for (const auto& [name, d] : tensors_) {
    if (d.dtype == DType::kUndefined) throw ModelError("tensor '" + name + "' has no dtype");
    for (int64_t dim : d.shape)
      if (dim < 0)
        throw ModelError("tensor '" + name + "' has dynamic shape " + shape_str(d.shape) +
                         " (bind it with --batch or a fixed input shape)");
  }
  for (size_t i : topo_order()) {
    const Node& n = nodes[i];
    auto outs = infer_node(*this, n);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k].empty()) continue;
      const TensorDesc& d = tensor(n.outputs[k]);
      if (d.dtype != outs[k].first || d.shape != outs[k].second)
        throw ModelError(n.describe() + ": output '" + d.name + "' is recorded as " +
                         dtype_name(d.dtype) + " " + shape_str(d.shape) + " but the op gives " +
                         dtype_name(outs[k].first) + " " + shape_str(outs[k].second));
    }
  }
  for (const auto& o : outputs) {
    if (!produced.count(o) && !has_value(o) &&
        std::find(inputs.begin(), inputs.end(), o) == inputs.end())
      throw ModelError("graph output '" + o + "' is not produced by any node");
  }
  if (!layers.empty()) {
    std::vector<int> seen(nodes.size(), 0);
    for (size_t l = 0; l < layers.size(); ++l)
      for (size_t idx : layers[l].nodes) {
        if (idx >= nodes.size())
          throw ModelError("layer '" + layers[l].name + "' refers to a missing node");
        if (seen[idx]++)
          throw ModelError(nodes[idx].describe() + ": belongs to more than one layer");
        if (nodes[idx].layer != static_cast<int>(l))
          throw ModelError(nodes[idx].describe() + ": layer index disagrees with layer list");
      }
    for (size_t i = 0; i < nodes.size(); ++i)
      if (!seen[i]) throw ModelError(nodes[i].describe() + ": belongs to no layer");
  }
}

std::string dump(const Graph& g) {
  std::ostringstream os;
  auto desc = [&g](const std::string& name) {
    if (name.empty()) return std::string("-");
    if (!g.has_tensor(name)) return name + ":?";
    const auto& d = g.tensor(name);
    return name + ":" + dtype_name(d.dtype) + shape_str(d.shape);
  };
  os << "graph " << g.name << " (opset " << g.opset << ")\n";
  for (const auto& in : g.inputs) os << "  input  " << desc(in) << "\n";
  for (const auto& [name, v] : g.values())
    os << "  " << role_name(g.tensor(name).role) << " " << desc(name) << "\n";
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    os << "  [" << i << "]";
    if (n.layer >= 0) os << " L" << n.layer;
    os << " " << n.op_type << " '" << n.name << "' (";
    for (size_t k = 0; k < n.inputs.size(); ++k) os << (k ? ", " : "") << desc(n.inputs[k]);
    os << ") -> (";
    for (size_t k = 0; k < n.outputs.size(); ++k) os << (k ? ", " : "") << desc(n.outputs[k]);
    os << ")";
    for (const auto& [key, a] : n.attrs) os << " " << key << "=" << attr_str(a);
    os << "\n";
  }
  for (size_t l = 0; l < g.layers.size(); ++l)
    os << "  layer " << l << " '" << g.layers[l].name << "': " << g.layers[l].nodes.size()
       << " nodes\n";
  for (const auto& o : g.outputs) os << "  output " << desc(o) << "\n";
  return os.str();
}

}  // namespace pipetrain::ir
