// pipetrain's cost model for a stage: layers i..j of the profile's chain on
// r contiguous workers starting at `first`, with `downstream` workers from
// this stage to the end of the pipeline (its own included).
//
//   compute    C / r                       C = sum of forward + backward
//   allreduce  4 (r-1) P / (B_g r) / r     B_g = slowest link inside the group
//   in         2 a_{i-1} / (B_in r)        B_in = slowest link over [first-1, first+r)
//   out        2 a_j / (B_out r)           B_out = slowest link over [first, first+r+1)
//   time       max(max(C, allreduce r) / r, in, out) + tied
//   tied       sum over params read inside and outside the stage of
//              P_t / B + 2 latency (the two-copy allreduce before each
//              update; B the slowest link of the machine; it blocks the step)
//
// The allreduce overlaps the backward pass (the paper's max, not the
// reference code's sum); boundary transfers are always counted and overlap
// compute (factor 2: activations forward, gradients back), each at the
// slowest link it crosses. Memory per worker: in_flight = ceil(downstream /
// r) minibatches stash the stage's activations and input plus one weight
// version each, plus one gradient buffer:
//   memory = in_flight (A + a_{i-1} + P) + P.
// With activation recomputation a stage stashes only its input per minibatch
// in flight and runs its forward again before each backward:
//   compute    (C + F) / r                 F = sum of forward
//   memory     in_flight (a_{i-1} + P) + A + P   (one minibatch's activations refilled)
// The DP chooses it for a stage only when the stage would not fit otherwise.
#pragma once

#include <cstdint>
#include <vector>

#include "partitioner/plan.h"
#include "partitioner/profile.h"
#include "partitioner/topology.h"

namespace pipetrain::partitioner {

struct StageCost {
  double compute_s = 0, allreduce_s = 0, transfer_in_s = 0, transfer_out_s = 0, time_s = 0;
  double tied_s = 0;  // allreducing the gradients of params tied to other stages
  int in_flight = 1;
  double memory_bytes = 0;
  bool recompute = false;  // activations recomputed before the backward
};

/// Prefix sums over the chain, so any stage costs O(levels).
class ChainCosts {
 public:
  ChainCosts(const Profile& profile, const Topology& topology);
  int size() const { return n_; }
  double compute(int i, int j) const { return compute_[j + 1] - compute_[i]; }
  double forward(int i, int j) const { return forward_[j + 1] - forward_[i]; }
  double params(int i, int j) const { return params_[j + 1] - params_[i]; }
  double activations(int i, int j) const { return acts_[j + 1] - acts_[i]; }
  /// Bytes crossing the cut after layer k (0 for k < 0 or the last layer).
  double cut(int k) const { return k < 0 || k >= n_ - 1 ? 0.0 : cut_[k]; }
  const Topology& topology() const { return topology_; }
  /// Seconds to allreduce the params layers i..j share with layers outside.
  double tied(int i, int j) const;

  StageCost stage(int i, int j, int first, int r, int downstream, bool recompute = false) const;

  /// stage(i, j, first, r, ., recompute).time_s for varying j, with the links
  /// looked up once: the DP's inner loop. Bitwise the same value as stage()'s.
  class StageTimer {
   public:
    StageTimer(const ChainCosts& costs, int i, int first, int r, bool recompute = false);
    double time(int j) const;

   private:
    const ChainCosts& c_;
    int i_, r_;
    bool recompute_;
    double ar_bandwidth_, ar_latency_, in_s_, out_bandwidth_, out_latency_;
  };
  /// stage(i, j, first, r, downstream, recompute).memory_bytes.
  double memory(int i, int j, int r, int downstream, bool recompute = false) const;

 private:
  int n_;
  Topology topology_;
  std::vector<double> compute_, forward_, params_, acts_, cut_;
  std::vector<TiedParam> tied_;
  /// The slowest link's bandwidth and latency over workers [first, first +
  /// count), for first <= N and count <= N + 1 (the DP asks millions of
  /// times; the topology walks its levels each time). Empty for large N.
  struct Link {
    double bandwidth, latency;
  };
  std::vector<Link> links_;
  int link_stride_ = 0;
  Link link(int first, int count) const;
};

/// Builds a plan from stage boundaries and replication factors under the
/// pipetrain cost model: workers are assigned contiguously from
/// `first_worker`. `last_layers[s]` is the last layer of stage s;
/// `recompute[s]` (empty: none) recomputes stage s's activations.
Plan evaluate_plan(const Profile& profile, const Topology& topology,
                   const std::vector<int>& last_layers, const std::vector<int>& replication,
                   const std::string& strategy, int first_worker = 0,
                   const std::vector<bool>& recompute = {});

/// Data parallel on all workers under the pipetrain cost model (seconds per minibatch).
double data_parallel_time(const ChainCosts& costs);

}  // namespace pipetrain::partitioner
