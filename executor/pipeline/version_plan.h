// Which weight version each forward of a schedule uses, worked out before the
// run from the op lists alone, so the executor only looks it up. A version is
// the number of optimizer updates a stage has applied (counted from the start
// of the schedule). Backward passes always use their forward's version.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "partitioner/schedule.h"

namespace pipetrain::exec {

enum class VersionRule {
  kLatest,        // the newest weights at the time of the forward (flush schedules, PipeDream)
  kVerticalSync,  // the version stage 0's forward of the same microbatch used
  kTwoBW,         // microbatches of step t use the weights after update t - 1 (PipeDream-2BW)
};

struct WorkerVersions {
  /// Per op of the worker's program: for a forward, its version; -1 otherwise.
  std::vector<int64_t> forward_version;
  /// Per op index i: the lowest version a forward at index >= i uses
  /// (max() when none follows); older versions are not needed any more.
  std::vector<int64_t> min_future;
  /// Per op: updates applied before it.
  std::vector<int64_t> updates_before;
};

constexpr int64_t kNoFutureVersion = std::numeric_limits<int64_t>::max();

/// Throws PlanError when the rule asks for a version a worker has not made yet
/// (2BW with fewer microbatches per step than stages after the first), or
/// for vertical sync with replicated stages (their versions do not line up).
std::vector<WorkerVersions> plan_versions(const partitioner::Schedule& s, VersionRule rule,
                                          int microbatches_per_step);

}  // namespace pipetrain::exec
