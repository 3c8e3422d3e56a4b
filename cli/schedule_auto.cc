#include "cli/schedule_auto.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <vector>

#include "ir/error.h"
#include "partitioner/simulator.h"

namespace pipetrain::cli {

using partitioner::ScheduleKind;

namespace {

struct Candidate {
  ScheduleChoice choice;
  partitioner::SimResult sim;
  double peak_bytes = 0;  // the largest over the workers
  bool runnable = true;   // interleaved: only on a cut of its own (--stages P)
  std::string excluded;   // why it cannot be chosen; empty: allowed
};

const char* semantics_of(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::kPipeDream: return "async (weight stashing)";
    case ScheduleKind::kTwoBW: return "async (1-step delay)";
    default: return "exact";
  }
}

}  // namespace

std::string train_schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kPipeDream: return "1f1b";
    case ScheduleKind::kOneFOneB: return "1f1b-flush";
    default: return partitioner::schedule_name(kind);
  }
}

ScheduleChoice choose_schedule(const partitioner::Plan& plan, const partitioner::Profile& profile,
                               int64_t batch, const AutoScheduleOptions& o) {
  if (o.semantics != "any" && o.semantics != "exact")
    throw PlanError("--semantics must be 'any' or 'exact', not '" + o.semantics + "'");
  const int p = static_cast<int>(plan.stages.size());
  bool replicated = false;
  for (const auto& st : plan.stages) replicated = replicated || st.replication > 1;
  std::vector<Candidate> cands;
  std::map<int, partitioner::Profile> measured;  // per microbatch count
  auto profile_for = [&](int m) -> const partitioner::Profile& {
    if (!o.profile_at) return profile;
    auto it = measured.find(m);
    if (it == measured.end()) it = measured.emplace(m, o.profile_at(m)).first;
    return it->second;
  };
  auto add_one = [&](ScheduleKind kind, int m, int chunks, bool recompute) {
    Candidate c;
    c.choice = {kind, m, chunks, train_schedule_name(kind), recompute};
    const bool chunked = kind == ScheduleKind::kInterleaved || partitioner::v_shaped(kind);
    c.runnable = !chunked || static_cast<bool>(o.virtual_plan);
    partitioner::SimOptions so;
    so.microbatches = kind == ScheduleKind::kPipeDream ? 0 : m;
    so.overlap_allreduce = kind != ScheduleKind::kTwoBW;  // as the executor runs it
    so.synced_updates = o.clip_norm;
    so.recompute = recompute;
    so.optimizer_state = o.optimizer_state;
    so.chunks = chunks;
    const partitioner::Profile& profile = profile_for(kind == ScheduleKind::kPipeDream ? 1 : m);
    try {
      if (chunked && o.virtual_plan) {
        // Its own cut into p x chunks virtual stages, seen as p workers (as train predicts it).
        const auto [view, view_profile] = partitioner::interleaved_worker_view(
            o.virtual_plan(p * chunks, kind), profile, p, kind);
        c.sim = partitioner::simulate(view, view_profile, kind, so);
      } else {
        c.sim = partitioner::simulate(plan, profile, kind, so);
      }
    } catch (const PlanError&) {
      return;  // the schedule does not suit the plan (interleaved with replicas, too few layers)
    }
    for (const auto& st : c.sim.stages) c.peak_bytes = std::max(c.peak_bytes, st.peak_memory_bytes);
    const bool async = kind == ScheduleKind::kPipeDream || kind == ScheduleKind::kTwoBW;
    if (!c.runnable)
      c.excluded = "needs --stages P";
    else if (o.semantics == "exact" && async)
      c.excluded = "not exact";
    else if (o.bn_minibatch && m > 1 && kind != ScheduleKind::kGPipe &&
             kind != ScheduleKind::kPipeDream)
      c.excluded = "bn-stats minibatch";  // runs in gpipe's order, or not at all
    else if (o.clip_norm && async && replicated)
      c.excluded = "clip-norm: async replicas";
    else if (o.memory_bytes > 0 && c.peak_bytes > o.memory_bytes)
      c.excluded = "over --memory";
    cands.push_back(std::move(c));
  };
  // Recomputation only saves memory at the cost of a forward: a candidate
  // under --memory (or every one, when --recompute asks for it).
  std::vector<bool> recomputes = {o.recompute};
  if (!o.recompute && o.memory_bytes > 0) recomputes.push_back(true);
  auto add = [&](ScheduleKind kind, int m, int chunks = 1) {
    for (bool rc : recomputes) add_one(kind, m, chunks, rc);
  };
  add(ScheduleKind::kPipeDream, 1);
  for (int64_t m = 1; m <= std::min<int64_t>(batch, 4 * p); ++m) {
    if (batch % m != 0) continue;
    const int mi = static_cast<int>(m);
    add(ScheduleKind::kOneFOneB, mi);
    add(ScheduleKind::kGPipe, mi);
    if (m >= p) add(ScheduleKind::kTwoBW, mi);
    if (m >= p) add(ScheduleKind::kZeroBubbleH1, mi);
    if (m >= p && p > 1 && !replicated) add(ScheduleKind::kZeroBubbleH2, mi);
    if (m % p == 0 && p > 1)
      for (int v : {2, 3}) add(ScheduleKind::kInterleaved, mi, v);
    if (p > 1) add(ScheduleKind::kZeroBubbleV, mi, 2);
    if (p > 1) add(ScheduleKind::kDualPipeV, mi, 2);
    if (p > 1) add(ScheduleKind::kVHalf, mi, 2);
  }
  std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    return a.sim.samples_per_s > b.sim.samples_per_s;
  });
  // The fastest allowed; within 1% of it, the smallest bubble, then the
  // fewest microbatches (async schedules tie at the slowest stage's rate).
  auto best = std::find_if(cands.begin(), cands.end(),
                           [](const Candidate& c) { return c.excluded.empty(); });
  if (best != cands.end()) {
    const double fastest = best->sim.samples_per_s;
    for (auto it = best; it != cands.end(); ++it) {
      if (!it->excluded.empty() || it->sim.samples_per_s < 0.99 * fastest) continue;
      const double db = it->sim.bubble_fraction - best->sim.bubble_fraction;
      if (db < -1e-9 || (db < 1e-9 && it->choice.microbatches < best->choice.microbatches))
        best = it;
    }
  }
  fmt::print("schedule auto: {} candidates simulated on the measured profile{} ({} stage{}, {})\n",
             cands.size(),
             o.profile_at ? fmt::format(" at each microbatch size ({} measured)", measured.size())
                          : std::string(),
             p, p > 1 ? "s" : "", plan.config());
  fmt::print("  {:<15} {:>6} {:>11} {:>7} {:>12}  {:<35} {:<18} {}\n", "schedule", "micro",
             "samples/s", "bubble", "peak memory", "semantics", "per worker MiB", "");
  for (const auto& c : cands) {
    const bool chosen = best != cands.end() && &c == &*best;
    const std::string label =
        c.choice.chunks > 1 ? fmt::format("{} x{}", c.choice.name, c.choice.chunks) : c.choice.name;
    const std::string semantics = std::string(semantics_of(c.choice.kind)) +
                                  (c.choice.recompute && !o.recompute ? ", recompute" : "");
    std::string per_worker;  // each stage's (interleaved: each worker's) peak
    for (const auto& st : c.sim.stages)
      per_worker +=
          fmt::format("{}{:.1f}", per_worker.empty() ? "" : "/", st.peak_memory_bytes / 1048576.0);
    fmt::print("  {:<15} {:>6} {:>11.1f} {:>6.1f}% {:>8.1f} MiB  {:<35} {:<18} {}\n", label,
               c.choice.microbatches, c.sim.samples_per_s, 100 * c.sim.bubble_fraction,
               c.peak_bytes / 1048576.0, semantics, per_worker, chosen ? "<- runs" : c.excluded);
  }
  if (best == cands.end())
    throw PlanError(
        "--schedule auto: no schedule fits (--semantics " + o.semantics +
        (o.memory_bytes > 0 ? ", --memory " + fmt::format("{:g}", o.memory_bytes) : std::string()) +
        "); see the table above");
  return best->choice;
}

}  // namespace pipetrain::cli
