// Plan: the partitioner's answer. Stages are contiguous layer ranges of the
// profile's chain, each replicated on a set of workers, with the cost model's
// view of each stage and the predicted time per minibatch. Saved as JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "partitioner/profile.h"
#include "partitioner/topology.h"

namespace pipetrain::partitioner {

struct StagePlan {
  int first_layer = 0;  // inclusive, index into Profile::layers
  int last_layer = 0;   // inclusive
  std::string first_layer_name, last_layer_name;
  std::vector<std::string> nodes;  // IR node names of the stage's layers
  int replication = 1;
  std::vector<int> workers;  // replication entries
  // Per minibatch, as the cost model sees the stage (seconds).
  double compute_s = 0;       // (forward + backward) / replication
  double allreduce_s = 0;     // weight synchronisation / replication
  double tied_s = 0;          // tied params' gradient allreduce with other stages
  double transfer_in_s = 0;   // activations in + gradients out at the cut before the stage
  double transfer_out_s = 0;  // activations out + gradients in at the cut after it
  double round_trip_s = 0;    // its in-flight minibatches' round trip / (in_flight x replicas)
  double time_s = 0;          // the stage's time per minibatch
  int in_flight = 1;          // minibatches stashed per replica (1F1B, PipeDream)
  double memory_bytes = 0;    // per worker: stashed activations, weight versions, gradients
  /// Activation recomputation: stash only the stage's input per minibatch in
  /// flight, run the forward again before the backward (the DP's choice when
  /// the stage would not fit the memory otherwise).
  bool recompute = false;
};

struct Plan {
  std::string model;
  std::string cost_model = "pipetrain";  // or "pipedream"
  std::string strategy = "dp";  // dp, data-parallel, equal-layers, time-balanced, param-balanced
  Topology topology;
  int num_layers = 0;
  std::vector<StagePlan> stages;
  int noam = 1;  // ceil(workers used / replicas of the input stage)
  double time_per_minibatch_s = 0;
  double single_worker_s = 0;  // the whole model on one worker
  double data_parallel_s = 0;  // all workers data parallel, same cost model
  double speedup_over_single() const;
  double speedup_over_data_parallel() const;
  int workers_used() const;
  /// "15-1", "straight" (several stages, none replicated) or "16" (one stage).
  std::string config() const;
  /// The replication factors joined with '-' (always, even for straight).
  std::string replication_string() const;
};

/// Checks the plan on its own and against a topology: stages cover layers
/// 0..num_layers-1 contiguously, replication matches the worker lists, workers
/// exist and are used once, memory per worker fits (when the topology limits
/// it). Throws PlanError naming the stage.
void validate(const Plan& plan, const Topology& topology);
/// Checks that the plan's layers are the profile's (count and names at the
/// stage boundaries). Throws PlanError naming the missing layer.
void check_against_profile(const Plan& plan, const Profile& profile);

nlohmann::json to_json(const Plan& p);
Plan plan_from_json(const nlohmann::json& j);
Plan load_plan(const std::string& path);
void save_plan(const Plan& p, const std::string& path);

/// A table: one row per stage (layers, replication, workers, compute,
/// communication, memory), then the predicted times and speedups.
std::string format_plan(const Plan& p);

}  // namespace pipetrain::partitioner
