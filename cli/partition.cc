// `pipetrain partition profile.json|graph.txt|model.onnx --topology 4x4
// --bandwidth 10e9,150e9 [--memory 16e9] [--cost-model pipedream] -o plan.json`
// and `pipetrain zoo compare`: the DP's plan as a table and a one-line config.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "cli/commands.h"
#include "importer/importer.h"
#include "ir/error.h"
#include "models/zoo.h"
#include "partitioner/baselines.h"
#include "partitioner/dp.h"
#include "partitioner/json_util.h"
#include "partitioner/profile_ir.h"
#include "partitioner/simulator.h"

namespace pipetrain::cli {

namespace {

namespace pt = partitioner;

struct TopologyArgs {
  std::string shape, bandwidth, memory, latency, json;
  void add_to(CLI::App& cmd) {
    cmd.add_option("--topology", shape,
                   "Workers per level, outermost first: 4x4 = 4 servers x 4 GPUs");
    cmd.add_option("--bandwidth", bandwidth,
                   "Bytes/s per level, same order: 10e9,150e9 (one value: every level)");
    cmd.add_option("--memory", memory, "Bytes of memory per worker (default: no limit)");
    cmd.add_option("--latency", latency,
                   "Seconds per message per level, same order: 20e-6,5e-6 (default 0; "
                   "`pipetrain train --comm mpi` measures its own)");
    cmd.add_option("--topology-json", json, "Topology as JSON instead of the flags")
        ->check(CLI::ExistingFile);
  }
  pt::Topology get() const {
    if (!json.empty()) {
      pt::Topology t;
      try {
        t = pt::topology_from_json(pt::json_util::parse(pt::read_text_file(json), json));
      } catch (const PlanError& e) {
        throw PlanError(json + ": " + e.what());
      }
      if (!memory.empty()) t.memory_bytes = pt::parse_topology("1", "1", memory).memory_bytes;
      pt::set_latencies(t, latency);
      return t;
    }
    if (shape.empty()) throw PlanError("--topology is required (e.g. --topology 4x4)");
    pt::Topology t = pt::parse_topology(shape, bandwidth, memory);
    pt::set_latencies(t, latency);
    return t;
  }
};

struct PartitionArgs {
  std::string input;
  TopologyArgs topology;
  std::string cost_model = "pipetrain";
  bool straight = false, fewer_workers = false, baselines = false;
  double compression_ratio = 0;
  std::string output, profile_output;
  // For a model.onnx input.
  std::string device = "v100";
  int64_t batch = 0;
  int layer_depth = 0;
  bool no_fuse = false;  // model.onnx input: import without the fusion passes
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

pt::Profile profile_of_model(const std::string& path, const std::string& device, int64_t batch,
                             int layer_depth, bool fuse) {
  importer::ImportOptions o;
  if (batch > 0) o.batch = batch;
  o.layer_depth = layer_depth;
  o.fuse = fuse;
  ir::Graph g = importer::import_model(path, o);
  pt::Profile p = pt::analytic_profile(g, pt::device_spec(device));
  p.model = path;
  return p;
}

pt::Plan solve(const pt::Profile& p, const pt::Topology& t, const PartitionArgs& a) {
  if (a.cost_model == "pipedream") {
    pt::PipeDreamOptions o;
    o.straight = a.straight;
    o.fewer_workers = a.fewer_workers;
    o.compression_ratio = a.compression_ratio;
    o.memory_limit = t.memory_bytes > 0;
    return pt::partition_pipedream(p, t, o);
  }
  if (a.cost_model != "pipetrain")
    throw PlanError("--cost-model '" + a.cost_model + "': expected pipetrain or pipedream");
  pt::PartitionOptions o;
  o.straight = a.straight;
  o.fewer_workers = a.fewer_workers;
  return pt::partition(p, t, o);
}

void run_partition(const PartitionArgs& a) {
  pt::Topology t = a.topology.get();
  pt::Profile p = ends_with(a.input, ".onnx")
                      ? profile_of_model(a.input, a.device, a.batch, a.layer_depth, !a.no_fuse)
                      : pt::load_profile(a.input);
  pt::Plan plan = solve(p, t, a);
  fmt::print("{} layers on {} ({} cost model)\n", p.layers.size(), t.describe(), plan.cost_model);
  fmt::print("{}", pt::format_plan(plan));
  if (a.baselines) {
    fmt::print("\nbaselines (pipetrain cost model): {:<15} {:>10} {:>12} {:>9}\n", "strategy",
               "config", "ms/minibatch", "vs plan");
    for (const auto& b : pt::baseline_plans(p, t))
      fmt::print(
          "{:>33} {:<15} {:>10} {:>12.3f} {:>8.2f}x\n", "", b.strategy, b.config(),
          b.time_per_minibatch_s * 1e3,
          plan.time_per_minibatch_s > 0 ? b.time_per_minibatch_s / plan.time_per_minibatch_s : 0.0);
  }
  if (!a.output.empty()) pt::save_plan(plan, a.output);
  if (!a.profile_output.empty()) pt::save_profile(p, a.profile_output);
  fmt::print("config {}\n", plan.config());
}

// --- zoo compare -------------------------------------------------------------

struct CompareArgs {
  TopologyArgs topology;
  std::string device = "v100";
  int64_t batch = 32;
  std::vector<std::string> models;
  int microbatches = 0;
  int64_t width_divisor = 1;
  int layer_depth = 0;
};

// What bounds a stage's time per minibatch under the cost model.
std::string bound_of(const pt::StagePlan& st) {
  // Equal but for rounding (compute / r against compute x (1 / r)).
  auto is = [&](double part) { return std::abs(st.time_s - part) <= 1e-9 * st.time_s; };
  if (is(st.compute_s)) return "compute";
  if (is(st.allreduce_s)) return "allreduce";
  if (is(st.round_trip_s)) return "round-trip";  // its minibatches in flight wait downstream
  return "boundary transfer";
}

// One line: why the chosen config beats data parallel or not, from the three
// things the cost model weighs: compute, allreduce and boundary bytes.
std::string explain(const pt::Plan& plan, const pt::Profile& p) {
  double params_mb = double(p.param_bytes()) / 1e6;
  const pt::Plan dp = pt::data_parallel_plan(p, plan.topology);
  const auto& d = dp.stages[0];
  if (plan.stages.size() == 1) {
    // The cheapest cut a pipeline would pay for: the fewest bytes crossing.
    double min_cut = -1;
    for (size_t l = 0; l + 1 < p.layers.size(); ++l)
      if (p.layers[l].cut_bytes > 0 && (min_cut < 0 || double(p.layers[l].cut_bytes) < min_cut))
        min_cut = double(p.layers[l].cut_bytes);
    return fmt::format(
        "data parallel: allreduce of {:.0f} MB is {:.2f} ms/minibatch {} {:.2f} ms of compute, "
        "so it {}; the cheapest cut moves {:.3g} MB each way per minibatch",
        params_mb, d.allreduce_s * 1e3, d.allreduce_s <= d.compute_s ? "under" : "over",
        d.compute_s * 1e3,
        d.allreduce_s <= d.compute_s ? "hides behind compute and no split can win"
                                     : "is allreduce-bound but every split is slower",
        std::max(0.0, min_cut) / 1e6);
  }
  size_t slow = 0;
  double cut_mb = 0;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    if (plan.stages[s].time_s > plan.stages[slow].time_s) slow = s;
    if (s + 1 < plan.stages.size()) cut_mb += double(p.layers[plan.stages[s].last_layer].cut_bytes);
  }
  size_t heavy = 0;
  double heavy_bytes = -1;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    double b = 0;
    for (int l = plan.stages[s].first_layer; l <= plan.stages[s].last_layer; ++l)
      b += double(p.layers[l].param_bytes);
    if (b > heavy_bytes) heavy_bytes = b, heavy = s;
  }
  return fmt::format(
      "pipeline: data parallel is {}-bound ({:.2f} ms allreduce vs {:.2f} ms compute per "
      "minibatch); stage {} keeps {:.0f} of {:.0f} MB of weights on {} worker(s), the cuts move "
      "{:.2f} MB, slowest stage {} is {}-bound at {:.2f} ms",
      d.allreduce_s > d.compute_s ? "allreduce" : "compute", d.allreduce_s * 1e3, d.compute_s * 1e3,
      heavy, heavy_bytes / 1e6, params_mb, plan.stages[heavy].replication, cut_mb / 1e6, slow,
      bound_of(plan.stages[slow]), plan.stages[slow].time_s * 1e3);
}

// The paper's configs (PIPEDREAM.md section 7) for 16 workers, where the
// paper reports one: VGG-16 15-1 on both clusters, ResNet-50 data parallel.
std::vector<int> paper_config(const std::string& model, int workers) {
  if (workers != 16) return {};
  if (model == "vgg16") return {15, 1};
  if (model == "resnet50") return {16};
  return {};
}

void run_compare(const CompareArgs& a) {
  pt::Topology t = a.topology.get();
  std::vector<std::string> names = a.models;
  if (names.empty())
    for (const auto& e : models::zoo_entries()) names.push_back(e.name);
  const std::vector<pt::ScheduleKind> kinds = {
      pt::ScheduleKind::kGPipe, pt::ScheduleKind::kOneFOneB, pt::ScheduleKind::kPipeDream};
  fmt::print(
      "{} on {}, batch {} per minibatch; speedups are predicted (cost model) and "
      "simulated per schedule, over data parallel on all workers\n",
      a.device, t.describe(), a.batch);
  fmt::print("{:<11} {:>9} {:>9} {:>14} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "model",
             "params M", "size MB", "config", "ms/minib", "x 1 wkr", "x DP", "gpipe", "1f1b",
             "pipedream");
  std::vector<std::string> notes, papers;
  for (const auto& name : names) {
    models::ZooOptions zo;
    zo.weights = false;
    zo.width_divisor = a.width_divisor;
    onnx::ModelProto proto = models::build_zoo_model(name, zo);
    importer::ImportOptions io;
    io.batch = a.batch;
    io.layer_depth = a.layer_depth;
    ir::Graph g = importer::import_model_proto(proto, name, io);
    pt::Profile p = pt::analytic_profile(g, pt::device_spec(a.device));
    p.model = name;
    pt::Plan plan = pt::partition(p, t);
    std::string sims;
    for (auto k : kinds) {
      pt::SimOptions so;
      so.microbatches = a.microbatches;
      std::string cell = "n/a";
      try {
        auto r = pt::simulate(plan, p, k, so);
        cell = fmt::format("{:.2f}x", plan.data_parallel_s / r.time_per_minibatch_s);
      } catch (const PlanError&) {
      }
      sims += fmt::format(" {:>9}", cell);
    }
    fmt::print("{:<11} {:>9.1f} {:>9.0f} {:>14} {:>10.2f} {:>8.2f}x {:>8.2f}x{}\n", name,
               double(g.param_count()) / 1e6, double(p.param_bytes()) / 1e6, plan.config(),
               plan.time_per_minibatch_s * 1e3, plan.speedup_over_single(),
               plan.speedup_over_data_parallel(), sims);
    notes.push_back(fmt::format("{}: {}", name, explain(plan, p)));
    if (auto reps = paper_config(name, t.workers()); !reps.empty()) {
      pt::Plan paper = pt::config_plan(p, t, reps);
      pt::validate(paper, t);
      double sim = pt::simulate(paper, p, pt::ScheduleKind::kPipeDream).time_per_minibatch_s;
      std::string split = paper.stages.size() > 1
                              ? fmt::format(" (split after {})", paper.stages[0].last_layer_name)
                              : "";
      papers.push_back(fmt::format(
          "{}: paper's {}{} predicted {:.2f} ms/minibatch, simulated (pipedream) {:.2f} ms; "
          "chosen {} predicted {:.2f} ms (the paper's takes {:.2f}x as long)",
          name, paper.config(), split, paper.time_per_minibatch_s * 1e3, sim * 1e3, plan.config(),
          plan.time_per_minibatch_s * 1e3, paper.time_per_minibatch_s / plan.time_per_minibatch_s));
    }
  }
  fmt::print("\n");
  for (const auto& n : notes) fmt::print("{}\n", n);
  if (!papers.empty()) fmt::print("\nthe paper's configs on this cluster, same cost model:\n");
  for (const auto& n : papers) fmt::print("{}\n", n);
}

}  // namespace

void add_partition_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "partition", "Choose stages, replication and NOAM with PipeDream's dynamic program");
  auto a = std::make_shared<PartitionArgs>();
  cmd->add_option("input", a->input, "profile.json, PipeDream graph.txt or model.onnx")
      ->required()
      ->check(CLI::ExistingFile);
  a->topology.add_to(*cmd);
  cmd->add_option("--cost-model", a->cost_model,
                  "pipetrain, or pipedream (the reference optimizer's formulas and "
                  "level-by-level solve)")
      ->capture_default_str();
  cmd->add_flag("--straight", a->straight, "One worker per stage, no replication");
  cmd->add_flag("--fewer-workers", a->fewer_workers, "Use fewer workers when that is faster");
  cmd->add_option("--compression-ratio", a->compression_ratio,
                  "pipedream model: count boundary transfers, divided by this ratio");
  cmd->add_flag("--baselines", a->baselines,
                "Also print data parallel, equal layers, time- and parameter-balanced pipelines");
  cmd->add_option("-o,--output", a->output, "Plan JSON to write");
  cmd->add_option("--profile-output", a->profile_output, "Also write the profile used (JSON)");
  cmd->add_option("--device", a->device, "model.onnx input: device spec for the analytic profile")
      ->capture_default_str();
  cmd->add_option("--batch", a->batch, "model.onnx input: batch size")->check(CLI::PositiveNumber);
  cmd->add_option("--layer-depth", a->layer_depth, "model.onnx input: layers by name scope depth")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-fuse", a->no_fuse,
                "model.onnx input: import without the fusion passes (as train --no-fuse)");
  cmd->callback([a] { run_partition(*a); });
}

void add_zoo_compare_command(CLI::App& zoo) {
  auto* cmd = zoo.add_subcommand(
      "compare", "Partition every zoo model on a topology: the paper's results table, predicted");
  auto a = std::make_shared<CompareArgs>();
  a->topology.add_to(*cmd);
  cmd->add_option("--device", a->device, "Device spec for the analytic profiles")
      ->capture_default_str();
  cmd->add_option("--batch", a->batch, "Minibatch size")->capture_default_str();
  cmd->add_option("--models", a->models, "Only these models")->delimiter(',');
  cmd->add_option("--microbatches", a->microbatches, "Simulated microbatches (default 4 x stages)");
  cmd->add_option("--width-divisor", a->width_divisor, "Shrink every model's widths (quick runs)")
      ->capture_default_str();
  cmd->add_option("--layer-depth", a->layer_depth, "Layers by name scope depth (0: one node each)")
      ->capture_default_str();
  cmd->callback([a] { run_compare(*a); });
}

}  // namespace pipetrain::cli
