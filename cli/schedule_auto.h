// `--schedule auto`: every schedule the executor runs, at every microbatch
// count that splits the minibatch (up to 4 per stage), with and without
// activation recomputation under a memory limit, simulated on the
// measured profile (one per microbatch size, given AutoScheduleOptions::
// profile_at) and the chosen plan; the fastest one whose semantics the
// user accepts and whose peak memory fits runs. Interleaved 1F1B (2 and 3
// chunks per worker) is simulated on its own cut of the model into P x v
// virtual stages, and runs when the caller can cut so (`--stages P`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "partitioner/plan.h"
#include "partitioner/profile.h"
#include "partitioner/schedules.h"

namespace pipetrain::cli {

struct ScheduleChoice {
  partitioner::ScheduleKind kind = partitioner::ScheduleKind::kPipeDream;
  int microbatches = 1;
  int chunks = 1;          // interleaved: model chunks per worker
  std::string name;        // as --schedule spells it
  bool recompute = false;  // activations recomputed (a candidate under --memory)
};

struct AutoScheduleOptions {
  std::string semantics = "any";  // "exact": flush schedules only
  double memory_bytes = 0;        // per worker; 0: no limit
  bool clip_norm = false;         // updates meet across stages (and no async replicas)
  bool recompute = false;         // activations recomputed: less memory, one more forward
  double optimizer_state = 0;     // optimizer state per param byte (SimOptions's)
  /// --bn-stats minibatch on a model with BatchNorm: flush schedules run in
  /// gpipe's order, 2bw and interleaved not at all (with microbatches).
  bool bn_minibatch = false;
  /// The plan a chunked schedule (interleaved, a V) would run with this many
  /// virtual stages (the plan's workers x chunks), or PlanError when the model has
  /// too few layers; empty: they are shown but cannot be chosen (a plan with replicas).
  std::function<partitioner::Plan(int virtual_stages, partitioner::ScheduleKind kind)> virtual_plan;
  /// The profile of a minibatch run as `microbatches` microbatches: measured
  /// at the microbatch's size (its narrower products, the update and the
  /// gradient accumulation) and scaled to the minibatch. Called once per
  /// count; empty: `profile` for every count (its times divided by it).
  std::function<partitioner::Profile(int microbatches)> profile_at;
};

/// --schedule's name for a kind: 1f1b (PipeDream), 1f1b-flush, gpipe, 2bw, ...
std::string train_schedule_name(partitioner::ScheduleKind kind);

/// Simulates the candidates, prints their table, and returns the fastest
/// allowed one; PlanError naming the reason when none is allowed.
ScheduleChoice choose_schedule(const partitioner::Plan& plan, const partitioner::Profile& profile,
                               int64_t batch, const AutoScheduleOptions& options);

}  // namespace pipetrain::cli
