// PipeDream's dynamic program with stage replication (PIPEDREAM.md sections
// 2-3), in two cost models:
//
// pipetrain (default): one flat solve over contiguous worker ranges, so any
// replication count fits (15-1 on 4x4 included); every stage costed by
// cost_model.h (allreduce and boundary transfers at the slowest link they
// cross, allreduce overlapping backward); a stage always holds at least one
// layer; optionally fewer workers when that is faster; memory limit per worker.
//
// pipedream: the reference optimizer (optimizer_graph_hierarchical.py),
// formula for formula: level-by-level solve, allreduce added to compute and
// divided by the workers per component in the base case only, boundary
// transfers only with a compression ratio, all workers used (so stages with
// no compute can appear), its stash formula ceil((N - m) / r) for memory.
// It runs on the chain of the profile's layers (the reference enumerates
// antichains; for a chain of layers both give the same states).
#pragma once

#include "partitioner/plan.h"
#include "partitioner/profile.h"
#include "partitioner/topology.h"

namespace pipetrain::partitioner {

struct PartitionOptions {
  bool straight = false;       // every stage on one worker
  bool fewer_workers = false;  // use M <= N workers when strictly faster
  /// Honour topology.memory_bytes (when > 0); candidates over it are skipped.
  bool memory_limit = true;
};

/// Throws PlanError when no partition fits (memory, or straight with more
/// workers than layers and fewer_workers off).
Plan partition(const Profile& profile, const Topology& topology,
               const PartitionOptions& options = {});

struct PipeDreamOptions {
  bool straight = false;         // --straight_pipeline
  bool fewer_workers = false;    // --use_fewer_machines
  double compression_ratio = 0;  // --activation_compression_ratio; 0: transfers are free
  bool memory_limit = false;     // --use_memory_constraint with topology.memory_bytes
  /// Try every split point as the reference does; else the lowest level
  /// stops scanning a cell's splits once their last stage alone is slower
  /// than the best found, with the same answer. For tests.
  bool exhaustive = false;
};

/// The reference optimizer's answer on the same profile and topology.
Plan partition_pipedream(const Profile& profile, const Topology& topology,
                         const PipeDreamOptions& options = {});

}  // namespace pipetrain::partitioner
