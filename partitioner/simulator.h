// Discrete-event simulation of a Plan under a schedule: stage times from the
// profile, transfers at the bandwidth of the link between the two workers
// (one queue per directed link, overlapping compute), allreduces among the
// replicas of a stage at the slowest link they span.
//
// Flush schedules (gpipe, 1f1b, interleaved, zb-h1) and 2bw split each
// minibatch (the profile's batch) into m = `microbatches` equal parts, so a
// microbatch costs 1/m of the stage's time and cut bytes; a step carries one
// minibatch per replica of the most replicated stage. pipedream runs
// `microbatches` whole minibatches (default 8 x workers). Interleaved splits each stage into
// `chunks` equal chunks (the wrap-around transfer uses the mean cut), zb-v into 2 in a V
// (place_chunk); zb-h1 and zb-v split backward evenly into input and weight gradients
// where the profile has no measured split.
#pragma once

#include <string>
#include <vector>

#include "partitioner/plan.h"
#include "partitioner/profile.h"
#include "partitioner/schedule.h"
#include "partitioner/schedules.h"

namespace pipetrain::partitioner {

struct SimOptions {
  int microbatches = 0;           // per minibatch; 0: 4 x stages
  int chunks = 2;                 // interleaved
  int steps = 3;                  // 2bw
  bool overlap_allreduce = true;  // see ScheduleShape (the executor runs 2bw without)
  /// Every stage's update waits for all stages' (pipeline-wide gradient
  /// clipping sums the squared norms first).
  bool synced_updates = false;
  /// With synced_updates, a flush schedule's updates go ahead of the norm and are
  /// redone when it clips (Zero Bubble's post-validation, as the executor runs them):
  /// no meeting of all stages, and on every worker (the ones that go ahead depend on
  /// timing) a copy of the weights and optimizer state in the peak.
  bool post_validation = true;
  /// Activation recomputation: a stage stashes only its input per microbatch
  /// and runs its forward again before each backward.
  bool recompute = false;
  /// Optimizer state per param byte (plain SGD 0, momentum 1, Adam 2): held
  /// once beside the weights.
  double optimizer_state = 0;
  /// gpipe and 1f1b, per plan stage (empty: none): the stage's weight
  /// gradients in one W op over the whole step (ScheduleShape::
  /// batched_weights), timed from its layers' backward_weight_step_s where
  /// measured.
  std::vector<bool> batched_weights;
  /// ScheduleKind::kFromFile: the schedule to time (schedule_file.h), whose
  /// microbatch count is used; its stages are the plan's, or P x V of them on the
  /// plan's P workers (each cut into V chunks).
  const Schedule* schedule = nullptr;
};

struct StageSimStats {
  int peak_in_flight = 0;   // microbatches stashed at once on one replica
  int weight_versions = 1;  // distinct weight versions alive at once
  /// Activations in flight + versions x params + gradients + optimizer state.
  double peak_memory_bytes = 0;
  double peak_activation_bytes = 0;  // the first part alone
};

struct SimResult {
  std::string schedule;
  int microbatches = 0;
  double makespan_s = 0;
  /// Flush schedules: the makespan over the minibatches per step. pipedream
  /// and 2bw: the steady-state interval between minibatches leaving stage 0.
  double time_per_minibatch_s = 0;
  double samples_per_s = 0;           // batch / time_per_minibatch (0 if the batch is unknown)
  double bubble_fraction = 0;         // 1 - busy / (workers x makespan)
  std::vector<StageSimStats> stages;  // per plan stage
  Schedule schedule_ops;
  ScheduleRun run;
  std::vector<int> physical_workers;  // schedule worker -> plan worker id
};

/// Throws PlanError when the plan does not match the profile, or the
/// schedule does not suit the plan (interleaved with replicated stages).
SimResult simulate(const Plan& plan, const Profile& profile, ScheduleKind kind,
                   const SimOptions& options = {});

/// gpipe and 1f1b on unreplicated stages: which stages should batch their
/// weight gradients, by simulating none, all but the first and all (the
/// first stage's whole backward is its W: batched, it can start only after
/// the last gradient arrives) and taking the fastest of those whose peak
/// memory per stage stays within (1 + max_memory_growth) of none's (a
/// batched stage keeps what its W reads of every microbatch until the W:
/// 1f1b's stages would hold gpipe's count); the fewer batched on a tie.
/// Empty when none wins or the schedule and plan cannot batch.
std::vector<bool> best_batched_weights(const Plan& plan, const Profile& profile, ScheduleKind kind,
                                       const SimOptions& options, double max_memory_growth = 0.05);

/// Interleaved 1F1B and the V schedules run a plan of p x v virtual stages on
/// p workers (place_chunk: worker w holds w, w + p, ... or w and 2p - 1 - w),
/// while simulate() models p workers whose stage it cuts into v chunks. This
/// is that view: one layer per virtual stage (its totals), worker w's chunks
/// made contiguous, one stage per worker.
std::pair<Plan, Profile> interleaved_worker_view(const Plan& plan, const Profile& profile,
                                                 int workers,
                                                 ScheduleKind kind = ScheduleKind::kInterleaved);
/// The same for any placement: `held[w]` lists worker w's virtual stages in the
/// order simulate() numbers its chunks (ascending, as a schedule file's).
std::pair<Plan, Profile> worker_view(const Plan& plan, const Profile& profile,
                                     const std::vector<std::vector<int>>& held,
                                     const std::string& config);

/// Chrome trace JSON (chrome://tracing, Perfetto): one process per result,
/// one thread per worker, plus one track per link for transfers.
std::string chrome_trace(const std::vector<SimResult>& results);
/// An SVG picture: per result, one row per worker, ops as coloured boxes.
std::string svg_timeline(const std::vector<SimResult>& results);

}  // namespace pipetrain::partitioner
