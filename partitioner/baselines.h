// Baselines on the pipetrain cost model, to compare the DP's plan against:
// data parallel on all workers; straight pipelines (one worker per stage,
// p = min(workers, layers) stages) cut into equal layer counts, balanced by
// compute time (torchgpipe's balance by time) or by parameter bytes
// (DeepSpeed's partition_method="parameters").
#pragma once

#include <vector>

#include "partitioner/plan.h"
#include "partitioner/profile.h"
#include "partitioner/topology.h"

namespace pipetrain::partitioner {

Plan data_parallel_plan(const Profile& profile, const Topology& topology);
Plan equal_layers_plan(const Profile& profile, const Topology& topology);
Plan time_balanced_plan(const Profile& profile, const Topology& topology);
Plan param_balanced_plan(const Profile& profile, const Topology& topology);
/// A V's virtual stages, one per worker of `topology` (2P for P workers: worker w
/// holds stages w and 2P - 1 - w), cut so that the busiest worker's two chunks (forward + backward)
/// take the least time: the time-balanced cut, then each cut moved along while that lowers the
/// busiest worker (ties: the spread of the workers' loads). Throws PlanError when the
/// model has fewer layers than virtual stages.
Plan v_balanced_plan(const Profile& profile, const Topology& topology);
/// All four, in that order.
std::vector<Plan> baseline_plans(const Profile& profile, const Topology& topology);

/// The best plan with a given replication per stage (the paper's "15-1":
/// {15, 1}), workers contiguous from 0: an exact DP over the split points
/// minimising the slowest stage under the pipetrain cost model, O(stages n^2).
/// Throws PlanError when the factors need more workers than the topology has
/// or more stages than layers.
Plan config_plan(const Profile& profile, const Topology& topology,
                 const std::vector<int>& replication);

/// Cuts weights into exactly `parts` contiguous non-empty groups minimising
/// the largest group sum; returns the last index of each group. Exact: binary
/// search over the bottleneck value with a greedy feasibility check.
std::vector<int> balanced_cuts(const std::vector<double>& weights, int parts);

}  // namespace pipetrain::partitioner
