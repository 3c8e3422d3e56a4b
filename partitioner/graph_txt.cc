#include "partitioner/graph_txt.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <sstream>

#include "ir/error.h"

namespace pipetrain::partitioner {

namespace {

struct TxtNode {
  std::string id, desc;
  double fwd_ms = 0, bwd_ms = 0, act = 0, params = 0;
};

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    if (pos == std::string::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + sep.size();
  }
}

double parse_value(const std::string& kv, const char* key, const std::string& where) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || trim(kv.substr(0, eq)) != key)
    throw PlanError(where + ": expected '" + key + "=<number>', got '" + kv + "'");
  std::string v = trim(kv.substr(eq + 1));
  // The reference writes a node with several outputs as "[a; b]": their sum.
  if (!v.empty() && v.front() == '[') {
    double sum = 0;
    for (const auto& part : split(v.substr(1, v.size() - 2), ";"))
      sum += parse_value(std::string(key) + "=" + trim(part), key, where);
    return sum;
  }
  try {
    size_t used = 0;
    double d = std::stod(v, &used);
    if (used != v.size()) throw std::invalid_argument(v);
    return d;
  } catch (const std::exception&) {
    throw PlanError(where + ": '" + v + "' is not a number for " + key);
  }
}

}  // namespace

Profile read_graph_txt(const std::string& text, const std::string& what) {
  std::vector<TxtNode> nodes;
  std::map<std::string, size_t> index;
  std::vector<std::pair<size_t, size_t>> edges;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string where = what + ":" + std::to_string(line_no);
    if (trim(line).empty()) continue;
    if (line[0] == '\t') {
      auto parts = split(trim(line), " -- ");
      if (parts.size() != 2) throw PlanError(where + ": expected an edge 'node<a> -- node<b>'");
      auto a = index.find(trim(parts[0])), b = index.find(trim(parts[1]));
      if (a == index.end() || b == index.end())
        throw PlanError(where + ": edge names an unknown node '" +
                        (a == index.end() ? trim(parts[0]) : trim(parts[1])) + "'");
      edges.emplace_back(a->second, b->second);
      continue;
    }
    auto parts = split(trim(line), " -- ");
    if (parts.size() < 3)
      throw PlanError(where + ": expected 'node<id> -- <description> -- <metadata>'");
    auto meta = split(parts[2], ", ");
    if (meta.size() != 4)
      throw PlanError(where +
                      ": expected forward_compute_time, backward_compute_time, "
                      "activation_size and parameter_size");
    TxtNode n;
    n.id = trim(parts[0]);
    n.desc = parts[1];
    n.fwd_ms = parse_value(meta[0], "forward_compute_time", where);
    n.bwd_ms = parse_value(meta[1], "backward_compute_time", where);
    n.act = parse_value(meta[2], "activation_size", where);
    n.params = parse_value(meta[3], "parameter_size", where);
    if (!index.emplace(n.id, nodes.size()).second)
      throw PlanError(where + ": duplicate node id '" + n.id + "'");
    nodes.push_back(n);
  }
  if (nodes.empty()) throw PlanError(what + ": no nodes");

  // Drop what the reference drops: Input sources and unused __getitem__ sinks.
  size_t n = nodes.size();
  std::vector<int> indeg(n, 0), outdeg(n, 0);
  for (auto [a, b] : edges) ++indeg[b], ++outdeg[a];
  std::vector<bool> keep(n, true);
  for (size_t i = 0; i < n; ++i) {
    if (indeg[i] == 0 && nodes[i].desc.rfind("Input", 0) == 0) keep[i] = false;
    if (outdeg[i] == 0 && nodes[i].desc.rfind("__getitem__", 0) == 0) keep[i] = false;
  }
  std::vector<std::vector<size_t>> out(n);
  std::vector<int> kept_indeg(n, 0);
  for (auto [a, b] : edges)
    if (keep[a] && keep[b]) out[a].push_back(b), ++kept_indeg[b];

  // Kahn's algorithm, smallest file position first: a deterministic chain.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (keep[i] && kept_indeg[i] == 0) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t b : out[i])
      if (--kept_indeg[b] == 0) ready.push(b);
  }
  size_t kept = static_cast<size_t>(std::count(keep.begin(), keep.end(), true));
  if (order.size() != kept) throw PlanError(what + ": the node graph has a cycle");
  if (order.empty()) throw PlanError(what + ": no nodes besides inputs");

  std::vector<int> pos(n, -1);
  for (size_t k = 0; k < order.size(); ++k) pos[order[k]] = static_cast<int>(k);
  Profile p;
  p.source = "graph.txt";
  p.model = what;
  // last_reader[k]: the furthest position reading node order[k]'s output.
  std::vector<int> last_reader(order.size(), -1);
  for (size_t a = 0; a < n; ++a)
    for (size_t b : out[a]) {
      p.edges.emplace_back(pos[a], pos[b]);
      last_reader[pos[a]] = std::max(last_reader[pos[a]], pos[b]);
    }
  std::sort(p.edges.begin(), p.edges.end());
  // A layer is named by its description when that is unique (what the
  // writer emits), else by its node id ("ReLU(inplace)" repeats).
  std::map<std::string, int> desc_count;
  for (size_t k : order) ++desc_count[nodes[k].desc];
  for (size_t k = 0; k < order.size(); ++k) {
    const TxtNode& t = nodes[order[k]];
    LayerProfile l;
    l.name = desc_count[t.desc] == 1 ? t.desc : t.id;
    l.forward_s = t.fwd_ms / 1000.0;
    l.backward_s = t.bwd_ms / 1000.0;
    l.output_bytes = static_cast<int64_t>(std::llround(t.act));
    l.param_bytes = static_cast<int64_t>(std::llround(t.params));
    p.layers.push_back(l);
  }
  // cut after position c: every node at or before c read by a node after c.
  for (size_t c = 0; c < order.size(); ++c)
    for (size_t k = 0; k <= c; ++k)
      if (last_reader[k] > static_cast<int>(c)) p.layers[c].cut_bytes += p.layers[k].output_bytes;
  return p;
}

std::string write_graph_txt(const Profile& p) {
  std::string s;
  size_t n = p.layers.size();
  std::vector<std::pair<int, int>> edges = p.edges;
  if (edges.empty())
    for (size_t i = 0; i + 1 < n; ++i)
      edges.emplace_back(static_cast<int>(i), static_cast<int>(i + 1));
  std::vector<bool> has_in(n, false);
  for (auto [a, b] : edges) has_in[b] = true;
  s += "node0 -- Input0 -- forward_compute_time=0.000000, backward_compute_time=0.000000, "
       "activation_size=0.0, parameter_size=0.000\n";
  for (size_t i = 0; i < n; ++i) {
    const LayerProfile& l = p.layers[i];
    std::string desc = l.name;
    std::replace(desc.begin(), desc.end(), '\n', ' ');
    s += fmt::format(
        "node{} -- {} -- forward_compute_time={:.6f}, backward_compute_time={:.6f}, "
        "activation_size={:.1f}, parameter_size={:.3f}\n",
        i + 1, desc, l.forward_s * 1e3, l.backward_s * 1e3, double(l.output_bytes),
        double(l.param_bytes));
  }
  for (size_t i = 0; i < n; ++i)
    if (!has_in[i]) s += fmt::format("\tnode0 -- node{}\n", i + 1);
  for (auto [a, b] : edges) s += fmt::format("\tnode{} -- node{}\n", a + 1, b + 1);
  return s;
}

}  // namespace pipetrain::partitioner
