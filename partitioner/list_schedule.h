// List scheduling of a flush schedule with split backwards: each worker, when free,
// starts the op that can start first (on a tie: B, then F, then W, the stage nearer the
// loss first), F only within the limits below, W to fill the time no F or B can use.
// The schedule search (schedule_search.h) seeds itself with it on the simulator's op
// times; V-Half (schedules.h) is it on a V with unit times and half 1F1B's memory.
#pragma once

#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "partitioner/schedule.h"

namespace pipetrain::partitioner {

/// One op's time per (stage, kind): F, B (kBackwardInput) and W; absent: 0.
using OpDurations = std::map<std::pair<int, OpKind>, double>;

struct ListScheduleLimits {
  /// Microbatch chunks stashed per worker at once (from its F to its W).
  int stash = std::numeric_limits<int>::max();
  /// Microbatches in the pipeline at once: a microbatch enters with its first stage's F
  /// and leaves with that stage's B, the last of its input gradients.
  int window = std::numeric_limits<int>::max();
};

/// Each worker's compute actions for `m` microbatches over `placement` (stage ->
/// worker) on `workers` workers; nullopt when the limits leave a worker nothing to start.
std::optional<std::vector<std::vector<ScheduleOp>>> list_schedule(const std::vector<int>& placement,
                                                                  int workers, int m,
                                                                  const ListScheduleLimits& limits,
                                                                  const OpDurations& time);

}  // namespace pipetrain::partitioner
