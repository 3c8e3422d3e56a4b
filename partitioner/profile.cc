#include "partitioner/profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "partitioner/graph_txt.h"
#include "partitioner/json_util.h"

namespace pipetrain::partitioner {

namespace ju = json_util;

double Profile::compute_s() const {
  double t = 0;
  for (const auto& l : layers) t += l.forward_s + l.backward_s;
  return t;
}

int64_t Profile::param_bytes() const {
  int64_t b = 0;
  for (const auto& l : layers) b += l.param_bytes;
  return b;
}

int Profile::find_layer(const std::string& name) const {
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].name == name) return static_cast<int>(i);
  return -1;
}

int64_t Profile::weight_stash_bytes(int first, int last) const {
  if (!weight_reads_known) return -1;
  int64_t bytes = 0;
  for (const auto& t : weight_reads) {
    const bool stashed = (t.first_reader >= first && t.first_reader <= last) ||
                         (t.first_reader < first && t.last_reader >= first);
    const auto w = std::lower_bound(t.weight_readers.begin(), t.weight_readers.end(), first);
    if (stashed && w != t.weight_readers.end() && *w <= last) bytes += t.bytes;
  }
  return bytes;
}

void validate(const Profile& p) {
  if (p.layers.empty()) throw PlanError("profile has no layers");
  std::set<std::string> names;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const LayerProfile& l = p.layers[i];
    std::string where = "profile layer " + std::to_string(i) + " '" + l.name + "'";
    if (!names.insert(l.name).second) throw PlanError(where + ": duplicate layer name");
    auto check = [&](double v, const char* what) {
      if (!std::isfinite(v) || v < 0)
        throw PlanError(where + ": " + what + " must be finite and >= 0");
    };
    check(l.forward_s, "forward_s");
    check(l.backward_s, "backward_s");
    check(l.update_s, "update_s");
    check(l.accumulate_s, "accumulate_s");
    if (l.backward_input_s > l.backward_s * (1 + 1e-9) || std::isnan(l.backward_input_s))
      throw PlanError(where + ": backward_input_s must be at most backward_s (negative: unknown)");
    if (std::isnan(l.backward_weight_step_s) || std::isinf(l.backward_weight_step_s))
      throw PlanError(where + ": backward_weight_step_s must be finite (negative: unknown)");
    check(static_cast<double>(l.output_bytes), "output_bytes");
    check(static_cast<double>(l.cut_bytes), "cut_bytes");
    check(static_cast<double>(l.carry_bytes), "carry_bytes");
    check(static_cast<double>(l.param_bytes), "param_bytes");
  }
  int n = static_cast<int>(p.layers.size());
  for (auto [a, b] : p.edges)
    if (a < 0 || b >= n || a >= b)
      throw PlanError("profile edge " + std::to_string(a) + " -> " + std::to_string(b) +
                      " is out of range or goes backwards in the layer order");
  for (const auto& t : p.tied) {
    if (t.bytes < 0 || t.layers.size() < 2 || !std::is_sorted(t.layers.begin(), t.layers.end()) ||
        t.layers.front() < 0 || t.layers.back() >= n ||
        std::adjacent_find(t.layers.begin(), t.layers.end()) != t.layers.end())
      throw PlanError("profile tied param '" + t.name +
                      "': needs bytes >= 0 and two or more distinct ascending layer indices "
                      "in range");
  }
  for (const auto& t : p.weight_reads) {
    const auto& w = t.weight_readers;
    if (t.bytes < 0 || t.first_reader < 0 || t.first_reader > t.last_reader || t.last_reader >= n ||
        w.empty() || !std::is_sorted(w.begin(), w.end()) || w.front() < t.first_reader ||
        w.back() > t.last_reader)
      throw PlanError("profile weight read '" + t.name +
                      "': needs bytes >= 0, 0 <= first_reader <= last_reader < layers, and "
                      "ascending weight_readers within [first_reader, last_reader]");
  }
}

nlohmann::json to_json(const Profile& p) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : p.layers)
    layers.push_back({{"name", l.name},
                      {"forward_s", l.forward_s},
                      {"backward_s", l.backward_s},
                      {"update_s", l.update_s},
                      {"accumulate_s", l.accumulate_s},
                      {"backward_input_s", l.backward_input_s},
                      {"backward_weight_step_s", l.backward_weight_step_s},
                      {"carry_bytes", l.carry_bytes},
                      {"output_bytes", l.output_bytes},
                      {"cut_bytes", l.cut_bytes},
                      {"cut_stash_bytes", l.cut_stash_bytes},
                      {"input_bytes", l.input_bytes},
                      {"param_bytes", l.param_bytes},
                      {"nodes", l.nodes}});
  nlohmann::json edges = nlohmann::json::array();
  for (auto [a, b] : p.edges) edges.push_back({a, b});
  nlohmann::json j = {{"format", "pipetrain-profile"},
                      {"version", 1},
                      {"model", p.model},
                      {"source", p.source},
                      {"device", p.device},
                      {"batch", p.batch},
                      {"backward_estimated", p.backward_estimated},
                      {"stash_at_readers", p.stash_at_readers},
                      {"layers", layers},
                      {"edges", edges}};
  if (!p.tied.empty()) {
    nlohmann::json tied = nlohmann::json::array();
    for (const auto& t : p.tied)
      tied.push_back({{"name", t.name}, {"bytes", t.bytes}, {"layers", t.layers}});
    j["tied"] = tied;
  }
  if (p.weight_reads_known) {
    nlohmann::json reads = nlohmann::json::array();
    for (const auto& t : p.weight_reads)
      reads.push_back({{"name", t.name},
                       {"bytes", t.bytes},
                       {"first_reader", t.first_reader},
                       {"last_reader", t.last_reader},
                       {"weight_readers", t.weight_readers}});
    j["weight_reads"] = reads;
  }
  return j;
}

Profile profile_from_json(const nlohmann::json& j) {
  const std::string where = "profile";
  if (!j.is_object()) throw PlanError("profile: expected a JSON object");
  if (j.contains("format") && j["format"] != "pipetrain-profile")
    throw PlanError("profile: 'format' is not \"pipetrain-profile\"");
  Profile p;
  p.model = ju::string_or(j, "model", "", where);
  p.source = ju::string_or(j, "source", "", where);
  p.device = ju::string_or(j, "device", "", where);
  p.batch = j.contains("batch") ? ju::integer(j, "batch", where) : 0;
  p.stash_at_readers = ju::boolean_or(j, "stash_at_readers", false, where);
  if (j.contains("backward_estimated")) {
    if (!j["backward_estimated"].is_boolean())
      throw PlanError("profile: field 'backward_estimated' must be true or false");
    p.backward_estimated = j["backward_estimated"].get<bool>();
  }
  const auto& layers = ju::array(j, "layers", where);
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& lj = layers[i];
    std::string w = "profile layer " + std::to_string(i);
    LayerProfile l;
    l.name = ju::string(lj, "name", w);
    l.forward_s = ju::number(lj, "forward_s", w);
    l.backward_s = ju::number(lj, "backward_s", w);
    if (lj.contains("update_s")) l.update_s = ju::number(lj, "update_s", w);
    if (lj.contains("accumulate_s")) l.accumulate_s = ju::number(lj, "accumulate_s", w);
    if (lj.contains("carry_bytes")) l.carry_bytes = ju::integer(lj, "carry_bytes", w);
    if (lj.contains("backward_input_s")) l.backward_input_s = ju::number(lj, "backward_input_s", w);
    if (lj.contains("backward_weight_step_s"))
      l.backward_weight_step_s = ju::number(lj, "backward_weight_step_s", w);
    l.output_bytes = ju::integer(lj, "output_bytes", w);
    l.cut_bytes = ju::integer(lj, "cut_bytes", w);
    if (lj.contains("cut_stash_bytes")) l.cut_stash_bytes = ju::integer(lj, "cut_stash_bytes", w);
    if (lj.contains("input_bytes")) l.input_bytes = ju::integer(lj, "input_bytes", w);
    l.param_bytes = ju::integer(lj, "param_bytes", w);
    if (lj.contains("nodes")) {
      if (!lj["nodes"].is_array()) throw PlanError(w + ": field 'nodes' must be an array");
      for (const auto& n : lj["nodes"]) {
        if (!n.is_string()) throw PlanError(w + ": 'nodes' must hold strings");
        l.nodes.push_back(n.get<std::string>());
      }
    }
    p.layers.push_back(std::move(l));
  }
  if (j.contains("edges")) {
    const auto& edges = ju::array(j, "edges", where);
    for (const auto& e : edges) {
      if (!e.is_array() || e.size() != 2)
        throw PlanError("profile: each edge must be [from, to] layer indices");
      p.edges.emplace_back(ju::small_integer(e[0], "profile: edge ends"),
                           ju::small_integer(e[1], "profile: edge ends"));
    }
  }
  if (j.contains("tied")) {
    for (const auto& tj : ju::array(j, "tied", where)) {
      TiedParam t;
      t.name = ju::string(tj, "name", "profile tied param");
      t.bytes = ju::integer(tj, "bytes", "profile tied param '" + t.name + "'");
      const auto& layers = ju::array(tj, "layers", "profile tied param '" + t.name + "'");
      for (const auto& l : layers) {
        t.layers.push_back(ju::small_integer(l, "profile tied param '" + t.name + "': 'layers'"));
      }
      p.tied.push_back(std::move(t));
    }
  }
  if (j.contains("weight_reads")) {
    p.weight_reads_known = true;
    for (const auto& tj : ju::array(j, "weight_reads", where)) {
      WeightRead t;
      t.name = ju::string(tj, "name", "profile weight read");
      const std::string w = "profile weight read '" + t.name + "'";
      t.bytes = ju::integer(tj, "bytes", w);
      t.first_reader = ju::small_integer(tj, "first_reader", w);
      t.last_reader = ju::small_integer(tj, "last_reader", w);
      for (const auto& l : ju::array(tj, "weight_readers", w))
        t.weight_readers.push_back(ju::small_integer(l, w + ": 'weight_readers'"));
      p.weight_reads.push_back(std::move(t));
    }
  }
  validate(p);
  return p;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw PlanError("cannot read '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw RuntimeFault("cannot write '" + path + "'");
    out << text;
    if (!out.flush()) throw RuntimeFault("cannot write '" + path + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw RuntimeFault("cannot write '" + path + "': " + ec.message());
}

Profile load_profile(const std::string& path) {
  std::string text = read_text_file(path);
  if (path.size() >= 4 && path.substr(path.size() - 4) == ".txt") {
    Profile p = read_graph_txt(text, path);
    validate(p);
    return p;
  }
  nlohmann::json j = ju::parse(text, path);
  try {
    return profile_from_json(j);
  } catch (const PlanError& e) {
    throw PlanError(path + ": " + e.what());
  }
}

void save_profile(const Profile& p, const std::string& path) {
  write_file_atomically(path, to_json(p).dump(1) + "\n");
}

}  // namespace pipetrain::partitioner
