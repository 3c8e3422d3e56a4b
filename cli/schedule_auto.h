// `--schedule auto`: every schedule the executor runs, at every microbatch
// count that splits the minibatch (up to 4 per stage), simulated on the
// measured profile and the chosen plan; the fastest one whose semantics the
// user accepts and whose peak memory fits runs. The simulator-only schedule
// (interleaved) is shown for comparison.
#pragma once

#include <cstdint>
#include <string>

#include "partitioner/plan.h"
#include "partitioner/profile.h"
#include "partitioner/schedules.h"

namespace pipetrain::cli {

struct ScheduleChoice {
  partitioner::ScheduleKind kind = partitioner::ScheduleKind::kPipeDream;
  int microbatches = 1;
  std::string name;  // as --schedule spells it
};

struct AutoScheduleOptions {
  std::string semantics = "any";  // "exact": flush schedules only
  double memory_bytes = 0;        // per worker; 0: no limit
  bool clip_norm = false;         // updates meet across stages (and no async replicas)
  bool recompute = false;         // activations recomputed: less memory, one more forward
};

/// --schedule's name for a kind: 1f1b (PipeDream), 1f1b-flush, gpipe, 2bw, ...
std::string train_schedule_name(partitioner::ScheduleKind kind);

/// Simulates the candidates, prints their table, and returns the fastest
/// allowed one; PlanError naming the reason when none is allowed.
ScheduleChoice choose_schedule(const partitioner::Plan& plan, const partitioner::Profile& profile,
                               int64_t batch, const AutoScheduleOptions& options);

}  // namespace pipetrain::cli
