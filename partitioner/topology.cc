#include "partitioner/topology.h"

#include <fmt/core.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "ir/error.h"
#include "partitioner/json_util.h"

namespace pipetrain::partitioner {

int Topology::workers() const {
  int n = 1;
  for (const auto& l : levels) n *= l.count;
  return n;
}

namespace {
// Strides from the outermost level in: the first level where a and b fall
// into different components is the slowest link a range [a, b] crosses.
const TopologyLevel* crossed_level(const Topology& t, int first, int count) {
  if (count <= 1) return nullptr;
  int a = first, b = first + count - 1;
  int stride = t.workers();
  for (const auto& l : t.levels) {
    stride /= l.count;
    if (a / stride != b / stride) return &l;
    a %= stride;
    b %= stride;
  }
  return nullptr;
}
}  // namespace

double Topology::slowest_link(int first, int count) const {
  const TopologyLevel* l = crossed_level(*this, first, count);
  return l ? l->bandwidth : std::numeric_limits<double>::infinity();
}

double Topology::slowest_link_latency(int first, int count) const {
  const TopologyLevel* l = crossed_level(*this, first, count);
  return l ? l->latency_s : 0.0;
}

std::string Topology::describe() const {
  std::string shape, bw;
  for (size_t i = 0; i < levels.size(); ++i) {
    shape += fmt::format("{}{}", i ? "x" : "", levels[i].count);
    bw += fmt::format("{}{:g} GB/s", i ? ", " : "", levels[i].bandwidth / 1e9);
  }
  std::string s = shape + " @ " + bw;
  std::string lat;
  for (size_t i = 0; i < levels.size(); ++i)
    if (levels[i].latency_s > 0)
      lat += fmt::format("{}{:.3g} us", lat.empty() ? "" : ", ", levels[i].latency_s * 1e6);
  if (!lat.empty()) s += " + " + lat + " per message";
  if (memory_bytes > 0) s += fmt::format(", {:g} GB per worker", memory_bytes / 1e9);
  return s;
}

void validate(const Topology& t) {
  if (t.levels.empty()) throw PlanError("topology has no levels");
  double total = 1;
  for (size_t i = 0; i < t.levels.size(); ++i) {
    const auto& l = t.levels[i];
    if (l.count < 1)
      throw PlanError("topology level " + std::to_string(i) + ": worker count " +
                      std::to_string(l.count) + " must be >= 1");
    if (!std::isfinite(l.bandwidth) || l.bandwidth <= 0)
      throw PlanError(fmt::format("topology level {}: bandwidth {} must be finite and > 0 bytes/s",
                                  i, l.bandwidth));
    if (!std::isfinite(l.latency_s) || l.latency_s < 0)
      throw PlanError(
          fmt::format("topology level {}: latency {} s must be finite and >= 0", i, l.latency_s));
    total *= l.count;
  }
  if (total > (1 << 20)) throw PlanError("topology has more than 2^20 workers");
  if (!std::isfinite(t.memory_bytes) || t.memory_bytes < 0)
    throw PlanError("topology memory per worker must be finite and >= 0");
}

namespace {
double parse_number(const std::string& s, const std::string& flag) {
  try {
    size_t used = 0;
    double d = std::stod(s, &used);
    if (used != s.size()) throw std::invalid_argument(s);
    return d;
  } catch (const std::exception&) {
    throw PlanError(flag + ": '" + s + "' is not a number");
  }
}
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, sep)) out.push_back(tok);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}
}  // namespace

Topology parse_topology(const std::string& shape, const std::string& bandwidths,
                        const std::string& memory) {
  Topology t;
  if (shape.empty()) throw PlanError("--topology: empty (expected e.g. 4x4)");
  for (const auto& part : split(shape, 'x')) {
    double c = parse_number(part, "--topology '" + shape + "'");
    if (c != std::floor(c) || c < 1 || c > (1 << 20))
      throw PlanError("--topology '" + shape + "': '" + part + "' is not a worker count >= 1");
    t.levels.push_back({static_cast<int>(c), 0});
  }
  auto bws = split(bandwidths, ',');
  if (bandwidths.empty())
    throw PlanError("--bandwidth: missing (bytes/s per level, e.g. 10e9,150e9)");
  if (bws.size() != 1 && bws.size() != t.levels.size())
    throw PlanError(fmt::format("--bandwidth '{}': {} values for {} topology levels", bandwidths,
                                bws.size(), t.levels.size()));
  for (size_t i = 0; i < t.levels.size(); ++i)
    t.levels[i].bandwidth = parse_number(bws.size() == 1 ? bws[0] : bws[i], "--bandwidth");
  t.memory_bytes = memory.empty() ? 0 : parse_number(memory, "--memory");
  validate(t);
  return t;
}

void set_latencies(Topology& t, const std::string& latencies) {
  if (latencies.empty()) return;
  const auto values = split(latencies, ',');
  if (values.size() != 1 && values.size() != t.levels.size())
    throw PlanError(fmt::format("--latency '{}': {} values for {} topology levels", latencies,
                                values.size(), t.levels.size()));
  for (size_t i = 0; i < t.levels.size(); ++i)
    t.levels[i].latency_s = parse_number(values.size() == 1 ? values[0] : values[i], "--latency");
  validate(t);
}

nlohmann::json to_json(const Topology& t) {
  nlohmann::json levels = nlohmann::json::array();
  for (const auto& l : t.levels) {
    nlohmann::json level = {{"count", l.count}, {"bandwidth", l.bandwidth}};
    if (l.latency_s > 0) level["latency_s"] = l.latency_s;
    levels.push_back(level);
  }
  return {{"levels", levels}, {"memory_bytes", t.memory_bytes}};
}

Topology topology_from_json(const nlohmann::json& j) {
  namespace ju = json_util;
  Topology t;
  const auto& levels = ju::array(j, "levels", "topology");
  for (size_t i = 0; i < levels.size(); ++i) {
    std::string w = "topology level " + std::to_string(i);
    int64_t c = ju::integer(levels[i], "count", w);
    if (c < 1 || c > (1 << 20)) throw PlanError(w + ": count must be >= 1");
    t.levels.push_back({static_cast<int>(c), ju::number(levels[i], "bandwidth", w),
                        ju::number_or(levels[i], "latency_s", 0, w)});
  }
  t.memory_bytes = ju::number_or(j, "memory_bytes", 0, "topology");
  validate(t);
  return t;
}

}  // namespace pipetrain::partitioner
