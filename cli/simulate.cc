// `pipetrain simulate plan.json --profile profile.json --schedule all
// --microbatches 8 --trace out.json --svg out.svg`: per schedule, time per
// minibatch, throughput, bubble and memory; the timelines as files.
#include <fmt/core.h>

#include <memory>

#include "cli/commands.h"
#include "ir/error.h"
#include "partitioner/schedule_file.h"
#include "partitioner/schedule_search.h"
#include "partitioner/simulator.h"

namespace pipetrain::cli {

namespace {

namespace pt = partitioner;

struct SimulateArgs {
  std::string plan, profile, schedule = "all", trace, svg, save_schedule;
  int microbatches = 0, chunks = 2;
};

std::string per_stage(const std::vector<pt::StageSimStats>& stages, int pt::StageSimStats::*f) {
  std::string s;
  for (size_t i = 0; i < stages.size(); ++i) s += fmt::format("{}{}", i ? "," : "", stages[i].*f);
  return s;
}

void run_simulate(const SimulateArgs& a) {
  pt::Plan plan = pt::load_plan(a.plan);
  pt::Profile profile = pt::load_profile(a.profile);
  pt::check_against_profile(plan, profile);
  std::vector<pt::ScheduleKind> kinds;
  pt::Schedule from_file;
  if (a.schedule == "all") {
    kinds = pt::all_schedule_kinds();
  } else if (a.schedule == "search") {
    kinds = {pt::ScheduleKind::kFromFile};
  } else if (pt::is_schedule_file(a.schedule)) {
    from_file = pt::load_schedule_file(a.schedule);  // validated: one message, nothing run
    kinds = {pt::ScheduleKind::kFromFile};
  } else {
    kinds = {pt::parse_schedule_kind(a.schedule)};
  }
  if (!a.save_schedule.empty() && kinds.size() != 1)
    throw PlanError("--save-schedule writes one schedule: give --schedule NAME");
  pt::SimOptions o;
  o.schedule = &from_file;
  o.microbatches = a.microbatches;
  o.chunks = a.chunks;
  fmt::print("plan {} on {}; cost model predicts {:.3f} ms per minibatch\n", plan.config(),
             plan.topology.describe(), plan.time_per_minibatch_s * 1e3);
  fmt::print("{:<12} {:>4} {:>12} {:>11} {:>8} {:>18} {:>14} {:>10}\n", "schedule", "m",
             "ms/minibatch", "samples/s", "bubble", "in flight/stage", "versions", "peak GB");
  std::vector<pt::SimResult> results;
  for (auto k : kinds) {
    pt::SimResult r;
    try {
      if (a.schedule == "search") {
        const pt::SearchResult found = pt::search_schedule(plan, profile, o);
        r = found.sim;
        r.schedule = "search";
        fmt::print(
            "search: {:.3f} ms per step, {:.1f}% below the best hand-made flush schedule within "
            "{:.1f} MiB per worker ({}, {:.3f} ms); lower bound (the busiest worker's compute) "
            "{:.3f} ms; {} simulations\n",
            r.makespan_s * 1e3, 100 * (1 - r.makespan_s / found.best_hand_made_s),
            found.memory_limit_bytes / 1048576.0, found.best_hand_made,
            found.best_hand_made_s * 1e3, found.lower_bound_s * 1e3, found.simulations);
      } else {
        r = pt::simulate(plan, profile, k, o);
      }
    } catch (const PlanError& e) {
      if (kinds.size() == 1) throw;
      fmt::print("{:<12} n/a: {}\n", pt::schedule_name(k), e.what());
      continue;
    }
    double peak = 0;
    for (const auto& s : r.stages) peak = std::max(peak, s.peak_memory_bytes);
    fmt::print("{:<12} {:>4} {:>12.3f} {:>11.1f} {:>7.1f}% {:>18} {:>14} {:>10.3f}\n", r.schedule,
               r.microbatches, r.time_per_minibatch_s * 1e3, r.samples_per_s,
               r.bubble_fraction * 100, per_stage(r.stages, &pt::StageSimStats::peak_in_flight),
               per_stage(r.stages, &pt::StageSimStats::weight_versions), peak / 1e9);
    results.push_back(std::move(r));
  }
  if (!a.save_schedule.empty())
    pt::write_file_atomically(a.save_schedule, pt::schedule_to_json(results[0].schedule_ops));
  if (!a.trace.empty()) pt::write_file_atomically(a.trace, pt::chrome_trace(results));
  if (!a.svg.empty()) pt::write_file_atomically(a.svg, pt::svg_timeline(results));
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "Simulate pipeline schedules over a plan");
  auto a = std::make_shared<SimulateArgs>();
  cmd->add_option("plan", a->plan, "Plan JSON from `pipetrain partition`")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--profile", a->profile, "Profile JSON or graph.txt the plan was made from")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--schedule", a->schedule,
                  "all, gpipe, 1f1b, pipedream, 2bw, interleaved, zb-h1, zb-h2, zb-v, dualpipev, "
                  "v-half, "
                  "search (list "
                  "scheduling and local improvement on this profile, against the hand-made flush "
                  "schedules within their memory), or a schedule file (.json: each worker's "
                  "actions; .csv: torch.distributed.pipelining's), validated first")
      ->capture_default_str();
  cmd->add_option("--microbatches", a->microbatches,
                  "Microbatches per minibatch (pipedream: minibatches run); default 4 x stages")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--chunks", a->chunks, "Interleaved: model chunks per worker")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--trace", a->trace, "Chrome trace JSON to write (Perfetto)");
  cmd->add_option("--svg", a->svg, "SVG timeline to write");
  cmd->add_option("--save-schedule", a->save_schedule,
                  "Write the schedule's actions per worker as a JSON schedule file, to edit and "
                  "give back as --schedule FILE (flush schedules)");
  cmd->callback([a] { run_simulate(*a); });
}

}  // namespace pipetrain::cli
