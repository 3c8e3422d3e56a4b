#include "partitioner/schedule_search.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <map>

#include "ir/error.h"
#include "partitioner/list_schedule.h"
#include "partitioner/schedule_file.h"
#include "partitioner/schedules.h"

namespace pipetrain::partitioner {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// One op's time per (stage, kind), as the simulator charged it in `run`.
OpDurations durations_of(const ScheduleRun& run) {
  OpDurations d;
  for (const TimedOp& t : run.ops) d[{t.op.stage, t.op.kind}] = t.end - t.start;
  return d;
}

double peak_bytes(const SimResult& r) {
  double peak = 0;
  for (const auto& st : r.stages) peak = std::max(peak, st.peak_memory_bytes);
  return peak;
}

}  // namespace

SearchResult search_schedule(const Plan& plan, const Profile& profile, const SimOptions& options,
                             const SearchOptions& search) {
  const int p = static_cast<int>(plan.stages.size());
  for (const auto& st : plan.stages)
    if (st.replication != 1) throw PlanError("schedule search runs unreplicated stages");
  SimOptions o = options;
  o.batched_weights = {};
  const int m = o.microbatches > 0 ? o.microbatches : 4 * p;
  o.microbatches = m;
  SearchResult out;
  // The hand-made flush schedules, the memory they hold, the op times.
  std::map<std::string, std::pair<double, double>> hand;  // name -> (step, peak)
  std::map<ScheduleKind, SimResult> reference;
  using Placements = SearchOptions::Placements;
  const bool straight = search.placements != Placements::kV;
  const bool bent = search.placements != Placements::kStraight && p > 1;
  for (ScheduleKind k :
       {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kZeroBubbleH1,
        ScheduleKind::kZeroBubbleH2, ScheduleKind::kInterleaved, ScheduleKind::kZeroBubbleV,
        ScheduleKind::kDualPipeV, ScheduleKind::kVHalf}) {
    if (v_shaped(k) ? !bent
                    : !straight || (k == ScheduleKind::kInterleaved &&
                                    search.placements != Placements::kAny))
      continue;  // not runnable on the plan's stages as they are
    try {
      SimResult r = simulate(plan, profile, k, o);
      hand[schedule_name(k)] = {r.makespan_s, peak_bytes(r)};
      reference[k] = std::move(r);
    } catch (const PlanError&) {
      // interleaved with microbatches its stages do not divide, a V of too few layers
    }
  }
  double limit = search.memory_limit_bytes;
  if (limit <= 0)
    for (const auto& [name, hp] : hand) limit = std::max(limit, hp.second);
  out.memory_limit_bytes = limit;
  out.best_hand_made_s = kNever;
  for (const auto& [name, hp] : hand)
    if (hp.second <= limit * (1 + 1e-9) && hp.first < out.best_hand_made_s)
      out.best_hand_made_s = hp.first, out.best_hand_made = name;
  if (reference.empty())
    throw PlanError("schedule search: no hand-made schedule runs on this plan to start from");
  // Every schedule computes the same per worker: any one's busiest worker is the bound.
  const ScheduleRun& any_run = reference.begin()->second.run;
  out.lower_bound_s = *std::max_element(any_run.busy_s.begin(), any_run.busy_s.end());

  // Candidates by list scheduling over both placements and every limit.
  struct Placement {
    std::vector<int> stage_worker;
    OpDurations time;
  };
  std::vector<Placement> placements;
  if (auto it = reference.find(ScheduleKind::kZeroBubbleH1); straight && it != reference.end()) {
    Placement line;
    for (int s = 0; s < p; ++s) line.stage_worker.push_back(s);
    line.time = durations_of(it->second.run);
    placements.push_back(std::move(line));
  }
  if (auto it = reference.find(ScheduleKind::kZeroBubbleV); bent && it != reference.end()) {
    Placement v;
    for (int s = 0; s < 2 * p; ++s)
      v.stage_worker.push_back(place_chunk(ScheduleKind::kZeroBubbleV, s, p).worker);
    v.time = durations_of(it->second.run);
    placements.push_back(std::move(v));
  }
  auto evaluate = [&](const Schedule& s) {
    SimOptions so = o;
    so.schedule = &s;
    ++out.simulations;
    return simulate(plan, profile, ScheduleKind::kFromFile, so);
  };
  // Starting points: the best hand-made schedule within the limit (so the search never
  // ends slower than it) and the best list schedule. Each improves on its own: from
  // the faster one alone the swaps can stall above where the other leads.
  struct Start {
    std::vector<int> placement;
    std::vector<std::vector<ScheduleOp>> actions;
    double s = kNever;
  };
  Start hand_start, list_start;
  for (const auto& [kind, r] : reference) {
    if (peak_bytes(r) > limit * (1 + 1e-9) || r.makespan_s >= hand_start.s) continue;
    hand_start.s = r.makespan_s;
    hand_start.placement.clear();
    for (const auto& ws : r.schedule_ops.stage_workers) hand_start.placement.push_back(ws.front());
    hand_start.actions.assign(r.schedule_ops.programs.size(), {});
    for (size_t w = 0; w < r.schedule_ops.programs.size(); ++w)
      for (const ScheduleOp& op : r.schedule_ops.programs[w])
        if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward ||
            op.kind == OpKind::kBackwardInput || op.kind == OpKind::kBackwardWeight)
          hand_start.actions[w].push_back({op.kind, op.stage, op.microbatch});
  }
  for (const Placement& pl : placements)
    for (int limit_mb = 1; limit_mb <= 2 * static_cast<int>(pl.stage_worker.size()); ++limit_mb) {
      ListScheduleLimits limits;
      limits.stash = limit_mb;
      auto actions = list_schedule(pl.stage_worker, p, m, limits, pl.time);
      if (!actions) continue;
      try {
        const Schedule s = complete_schedule("search", pl.stage_worker, m, *actions, "search");
        const SimResult r = evaluate(s);
        if (peak_bytes(r) <= limit * (1 + 1e-9) && r.makespan_s < list_start.s)
          list_start = {pl.stage_worker, *actions, r.makespan_s};
      } catch (const PlanError&) {
        // a list the validator refuses: not a candidate
      }
    }
  if (hand_start.actions.empty() && list_start.actions.empty())
    throw PlanError(fmt::format("schedule search found no schedule within {:.1f} MiB per worker",
                                limit / 1048576.0));
  // Local improvement: swap neighbouring actions of a worker while that helps, the
  // budget for each start.
  auto improve = [&](Start& st, int budget) {
    const int until = out.simulations + budget;
    for (bool improved = true; improved && out.simulations < until;) {
      improved = false;
      for (size_t w = 0; w < st.actions.size() && !improved; ++w)
        for (size_t i = 0; i + 1 < st.actions[w].size() && !improved; ++i) {
          if (out.simulations >= until) break;
          auto& list = st.actions[w];
          if (list[i].kind == list[i + 1].kind && list[i].stage == list[i + 1].stage) continue;
          std::swap(list[i], list[i + 1]);
          try {
            const Schedule s = complete_schedule("search", st.placement, m, st.actions, "search");
            const SimResult r = evaluate(s);
            if (peak_bytes(r) <= limit * (1 + 1e-9) && r.makespan_s < st.s * (1 - 1e-9)) {
              st.s = r.makespan_s;
              improved = true;
              continue;
            }
          } catch (const PlanError&) {
            // the swap broke an order the validator checks
          }
          std::swap(list[i], list[i + 1]);
        }
    }
  };
  if (!hand_start.actions.empty()) improve(hand_start, search.max_simulations);
  if (!list_start.actions.empty()) improve(list_start, search.max_simulations);
  const Start& best = list_start.s < hand_start.s ? list_start : hand_start;
  const std::vector<int>& best_placement = best.placement;
  const std::vector<std::vector<ScheduleOp>>& best_actions = best.actions;
  out.schedule = complete_schedule("search", best_placement, m, best_actions, "search");
  out.sim = evaluate(out.schedule);
  return out;
}

}  // namespace pipetrain::partitioner
