#include "partitioner/plan.h"

#include <fmt/core.h>

#include <set>

#include "ir/error.h"
#include "partitioner/json_util.h"

namespace pipetrain::partitioner {

namespace ju = json_util;

double Plan::speedup_over_single() const {
  return time_per_minibatch_s > 0 ? single_worker_s / time_per_minibatch_s : 0;
}
double Plan::speedup_over_data_parallel() const {
  return time_per_minibatch_s > 0 ? data_parallel_s / time_per_minibatch_s : 0;
}
int Plan::workers_used() const {
  int w = 0;
  for (const auto& s : stages) w += s.replication;
  return w;
}

std::string Plan::replication_string() const {
  std::string s;
  for (size_t i = 0; i < stages.size(); ++i)
    s += fmt::format("{}{}", i ? "-" : "", stages[i].replication);
  return s;
}

std::string Plan::config() const {
  if (stages.size() == 1) return std::to_string(stages[0].replication);
  for (const auto& s : stages)
    if (s.replication != 1) return replication_string();
  return "straight";
}

void validate(const Plan& plan, const Topology& topology) {
  validate(topology);
  if (plan.stages.empty()) throw PlanError("plan has no stages");
  if (plan.num_layers < 1) throw PlanError("plan covers no layers");
  int next = 0;
  std::set<int> used;
  const int n = topology.workers();
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const StagePlan& st = plan.stages[s];
    std::string where = "plan stage " + std::to_string(s);
    if (st.first_layer != next || st.last_layer < st.first_layer)
      throw PlanError(fmt::format("{}: layers {}..{} do not continue from layer {}", where,
                                  st.first_layer, st.last_layer, next));
    next = st.last_layer + 1;
    if (st.replication < 1 || st.replication != static_cast<int>(st.workers.size()))
      throw PlanError(fmt::format("{}: replication {} but {} workers listed", where, st.replication,
                                  st.workers.size()));
    for (int w : st.workers) {
      if (w < 0 || w >= n)
        throw PlanError(fmt::format("{}: worker {} does not exist in topology {} ({} workers)",
                                    where, w, topology.describe(), n));
      if (!used.insert(w).second)
        throw PlanError(fmt::format("{}: worker {} is already used by another stage", where, w));
    }
    if (topology.memory_bytes > 0 && st.memory_bytes > topology.memory_bytes)
      throw PlanError(fmt::format("{}: needs {:.3g} GB per worker, over the {:.3g} GB limit", where,
                                  st.memory_bytes / 1e9, topology.memory_bytes / 1e9));
  }
  if (next != plan.num_layers)
    throw PlanError(fmt::format("plan stages end at layer {} but the plan has {} layers", next - 1,
                                plan.num_layers));
}

void check_against_profile(const Plan& plan, const Profile& profile) {
  int n = static_cast<int>(profile.layers.size());
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const StagePlan& st = plan.stages[s];
    for (auto [idx, name] : {std::pair{st.first_layer, st.first_layer_name},
                             std::pair{st.last_layer, st.last_layer_name}}) {
      if (idx >= n)
        throw PlanError(
            fmt::format("plan stage {} names layer {} ('{}') that the profile lacks "
                        "(it has {} layers)",
                        s, idx, name, n));
      if (!name.empty() && profile.layers[idx].name != name)
        throw PlanError(
            fmt::format("plan stage {}: layer {} is '{}' in the plan but '{}' in the "
                        "profile",
                        s, idx, name, profile.layers[idx].name));
    }
  }
  if (plan.num_layers != n)
    throw PlanError(
        fmt::format("plan covers {} layers but the profile has {}", plan.num_layers, n));
}

nlohmann::json to_json(const Plan& p) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : p.stages)
    stages.push_back({{"first_layer", s.first_layer},
                      {"last_layer", s.last_layer},
                      {"first_layer_name", s.first_layer_name},
                      {"last_layer_name", s.last_layer_name},
                      {"nodes", s.nodes},
                      {"replication", s.replication},
                      {"workers", s.workers},
                      {"compute_s", s.compute_s},
                      {"allreduce_s", s.allreduce_s},
                      {"tied_s", s.tied_s},
                      {"transfer_in_s", s.transfer_in_s},
                      {"transfer_out_s", s.transfer_out_s},
                      {"round_trip_s", s.round_trip_s},
                      {"time_s", s.time_s},
                      {"in_flight", s.in_flight},
                      {"memory_bytes", s.memory_bytes},
                      {"recompute", s.recompute}});
  return {{"format", "pipetrain-plan"},
          {"version", 1},
          {"model", p.model},
          {"cost_model", p.cost_model},
          {"strategy", p.strategy},
          {"config", p.config()},
          {"topology", to_json(p.topology)},
          {"num_layers", p.num_layers},
          {"noam", p.noam},
          {"time_per_minibatch_s", p.time_per_minibatch_s},
          {"single_worker_s", p.single_worker_s},
          {"data_parallel_s", p.data_parallel_s},
          {"speedup_over_single", p.speedup_over_single()},
          {"speedup_over_data_parallel", p.speedup_over_data_parallel()},
          {"stages", stages}};
}

Plan plan_from_json(const nlohmann::json& j) {
  const std::string w = "plan";
  if (!j.is_object()) throw PlanError("plan: expected a JSON object");
  if (j.contains("format") && j["format"] != "pipetrain-plan")
    throw PlanError("plan: 'format' is not \"pipetrain-plan\"");
  Plan p;
  p.model = ju::string_or(j, "model", "", w);
  p.cost_model = ju::string_or(j, "cost_model", "pipetrain", w);
  p.strategy = ju::string_or(j, "strategy", "dp", w);
  p.topology = topology_from_json(ju::field(j, "topology", w));
  p.num_layers = ju::small_integer(j, "num_layers", w);
  p.noam = ju::small_integer(j, "noam", w);
  p.time_per_minibatch_s = ju::number(j, "time_per_minibatch_s", w);
  p.single_worker_s = ju::number_or(j, "single_worker_s", 0, w);
  p.data_parallel_s = ju::number_or(j, "data_parallel_s", 0, w);
  const auto& stages = ju::array(j, "stages", w);
  for (size_t i = 0; i < stages.size(); ++i) {
    const auto& sj = stages[i];
    std::string sw = "plan stage " + std::to_string(i);
    StagePlan s;
    s.first_layer = ju::small_integer(sj, "first_layer", sw);
    s.last_layer = ju::small_integer(sj, "last_layer", sw);
    s.first_layer_name = ju::string_or(sj, "first_layer_name", "", sw);
    s.last_layer_name = ju::string_or(sj, "last_layer_name", "", sw);
    if (sj.contains("nodes"))
      for (const auto& n : ju::array(sj, "nodes", sw)) {
        if (!n.is_string()) throw PlanError(sw + ": 'nodes' must hold strings");
        s.nodes.push_back(n.get<std::string>());
      }
    s.replication = ju::small_integer(sj, "replication", sw);
    for (const auto& wk : ju::array(sj, "workers", sw)) {
      s.workers.push_back(ju::small_integer(wk, sw + ": 'workers'"));
    }
    s.compute_s = ju::number_or(sj, "compute_s", 0, sw);
    s.allreduce_s = ju::number_or(sj, "allreduce_s", 0, sw);
    s.tied_s = ju::number_or(sj, "tied_s", 0, sw);
    s.transfer_in_s = ju::number_or(sj, "transfer_in_s", 0, sw);
    s.transfer_out_s = ju::number_or(sj, "transfer_out_s", 0, sw);
    s.round_trip_s = ju::number_or(sj, "round_trip_s", 0, sw);
    s.time_s = ju::number_or(sj, "time_s", 0, sw);
    s.in_flight = sj.contains("in_flight") ? ju::small_integer(sj, "in_flight", sw) : 1;
    s.memory_bytes = ju::number_or(sj, "memory_bytes", 0, sw);
    s.recompute = ju::boolean_or(sj, "recompute", false, sw);
    p.stages.push_back(std::move(s));
  }
  validate(p, p.topology);
  return p;
}

Plan load_plan(const std::string& path) {
  nlohmann::json j = ju::parse(read_text_file(path), path);
  try {
    return plan_from_json(j);
  } catch (const PlanError& e) {
    throw PlanError(path + ": " + e.what());
  }
}

void save_plan(const Plan& p, const std::string& path) {
  write_file_atomically(path, to_json(p).dump(1) + "\n");
}

std::string format_plan(const Plan& p) {
  std::string s =
      fmt::format("{:>5} {:>13} {:>4} {:>9} {:>11} {:>11} {:>11} {:>11} {:>11} {:>8} {:>9}\n",
                  "stage", "layers", "x", "workers", "compute ms", "allred ms", "xfer ms",
                  "trip ms", "time ms", "inflight", "mem GB");
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const StagePlan& st = p.stages[i];
    std::string workers = st.workers.empty() ? "-"
                          : st.workers.size() == 1
                              ? std::to_string(st.workers[0])
                              : fmt::format("{}..{}", st.workers.front(), st.workers.back());
    s += fmt::format(
        "{:>5} {:>13} {:>4} {:>9} {:>11.3f} {:>11.3f} {:>11.3f} {:>11} {:>11.3f} {:>8} "
        "{:>9.3f}\n",
        i, fmt::format("{}-{}", st.first_layer, st.last_layer), st.replication, workers,
        st.compute_s * 1e3, st.allreduce_s * 1e3,
        std::max(st.transfer_in_s, st.transfer_out_s) * 1e3,
        // The pipedream cost model has no round trip.
        st.round_trip_s > 0 ? fmt::format("{:.3f}", st.round_trip_s * 1e3) : "-",
        st.time_s * 1e3, st.in_flight, st.memory_bytes / 1e9);
    if (st.recompute) {  // the row says so
      s.pop_back();
      s += "  recompute\n";
    }
  }
  s += fmt::format(
      "time per minibatch {:.3f} ms (one worker {:.3f} ms, data parallel {:.3f} ms); "
      "speedup {:.2f}x over one worker, {:.2f}x over data parallel; NOAM {}\n",
      p.time_per_minibatch_s * 1e3, p.single_worker_s * 1e3, p.data_parallel_s * 1e3,
      p.speedup_over_single(), p.speedup_over_data_parallel(), p.noam);
  return s;
}

}  // namespace pipetrain::partitioner
