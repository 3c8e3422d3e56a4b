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
//   memory     in_flight (a_{i-1} + D + P) + A + P   (one minibatch's activations
//                                                refilled; D the data it is fed)
// The DP chooses it for a stage only when the stage would not fit otherwise.
//
// Round trip (PipeDream's asynchronous 1F1B): a replica of a stage holds
// in_flight minibatches, and each one is back only after the rest of the
// pipeline's forward, backward and boundary messages (each cut crossed twice,
// one message at the slowest link between the two stages' workers). So
//   round trip  (C(i..n-1) + E) / (in_flight r)    E = 2 sum of messages downstream
//                                                      + recomputed forwards
// bounds the stage's time per minibatch (Little's law). Compute alone never
// binds (in_flight r >= the downstream workers); the messages do when a cut
// is large and the link slow (GNMT's 340 MB cut between servers).
//
// Lockstep replicas: a stage's r replicas take minibatches round-robin, so
// their rounds are staggered by one minibatch time T each, and the allreduce
// of round k (A = allreduce r, per round) starts when the last has finished
// it and must end before the first one's next update, after its round k+1.
// With A > T they cannot stay staggered: they bunch until stagger + A <= r T,
//   stagger  S = clamp(r T - A, 0, (r-1) T),
// so a round runs its r minibatches within S while a neighbour stage sends
// them (upstream) or takes them (downstream, the gradients coming back at
// its pace) spread over (r-1) T_n less what bunching there saves
// (T_n - S_n / (r_n - 1) per gap, over min(r, r_n) - 1 gaps); a minibatch
// waits for its round to gather:
//   wait  max(0, spread - S) / 2    per neighbour,
// which E gains at the cut between the two, for the stage upstream of it and
// every stage before. GNMT on 2x8 at 25/150 GB/s, plan 7-9: stage 1's nine
// replicas allreduce 69 ms a round at T = 9.04 ms (S = 12 ms) and stage 0
// sends over 65 ms: a 26 ms wait, stage 0's round trip 9.36 ms against the
// simulator's 9.55 (9.04 without it). Equal replication on equal stages
// bunches alike and waits nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "partitioner/plan.h"
#include "partitioner/profile.h"
#include "partitioner/topology.h"

namespace pipetrain::partitioner {

/// cost_model.h's lockstep stagger of a stage of r replicas whose allreduce
/// costs `allreduce_s` per minibatch (StageCost::allreduce_s) and whose time
/// per minibatch is `time_s`.
inline double replica_stagger(double allreduce_s, int r, double time_s) {
  if (r < 2) return 0.0;
  return std::clamp(r * time_s - allreduce_s * r, 0.0, (r - 1) * time_s);
}

/// Timing of a stage's rounds, as lockstep_wait() needs it.
struct RoundShape {
  int r = 1;
  double time_s = 0, stagger_s = 0;
  double saved_per_gap_s = 0;  // T - S / (r - 1): what bunching saves between two minibatches
};

inline RoundShape round_shape(double allreduce_s, int r, double time_s) {
  RoundShape s{r, time_s, replica_stagger(allreduce_s, r, time_s), 0.0};
  if (r > 1) s.saved_per_gap_s = time_s - s.stagger_s / (r - 1);
  return s;
}

/// cost_model.h's lockstep wait of stage `s`'s rounds on its neighbour `n`
/// (upstream or downstream of it).
inline double lockstep_wait(const RoundShape& s, const RoundShape& n) {
  if (s.r < 2) return 0.0;
  const double saved = (std::min(s.r, n.r) - 1) * n.saved_per_gap_s;
  return std::max(0.0, (s.r - 1) * n.time_s - saved - s.stagger_s) / 2;
}

/// Both lockstep waits at the cut between stage `up` and the next, `down`.
inline double lockstep_waits(const RoundShape& up, const RoundShape& down) {
  return lockstep_wait(up, down) + lockstep_wait(down, up);
}

struct StageCost {
  double compute_s = 0, allreduce_s = 0, transfer_in_s = 0, transfer_out_s = 0, time_s = 0;
  double tied_s = 0;        // allreducing the gradients of params tied to other stages
  double round_trip_s = 0;  // the in-flight minibatches' round trip, when known (evaluate_plan)
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
  /// Data inputs (features, labels) layers i..j are fed.
  double inputs(int i, int j) const { return inputs_[j + 1] - inputs_[i]; }
  /// Bytes crossing the cut after layer k (0 for k < 0 or the last layer).
  double cut(int k) const { return k < 0 || k >= n_ - 1 ? 0.0 : cut_[k]; }
  const Topology& topology() const { return topology_; }
  /// Seconds to allreduce the params layers i..j share with layers outside.
  double tied(int i, int j) const;
  /// One message across the cut after layer k between the workers [first,
  /// first + span): its bytes at the slowest link there, plus its latency.
  double message(int k, int first, int span) const {
    const Link l = link(first, span);
    return cut(k) / l.bandwidth + l.latency;
  }
  /// The round-trip bound of a stage starting at layer i on r replicas with
  /// `downstream` workers to the end, given E (the messages and recomputed
  /// forwards from it on).
  double round_trip(int i, int r, int downstream, double extra) const {
    const int in_flight = (downstream + r - 1) / r;
    return (compute(i, n_ - 1) + extra) / (double(in_flight) * r);
  }

  StageCost stage(int i, int j, int first, int r, int downstream, bool recompute = false) const;

  /// stage(i, j, first, r, ., recompute).time_s for varying j, with the links
  /// looked up once: the DP's inner loop. Bitwise the same value as stage()'s.
  class StageTimer {
   public:
    StageTimer(const ChainCosts& costs, int i, int first, int r, bool recompute = false);
    double time(int j) const;
    /// The replicas' allreduce part of time(j): a lower bound of it that
    /// only grows with j (the DP stops there).
    double allreduce_s(int j) const { return c_.params(i_, j) * ar_per_byte_ + ar_fixed_; }

   private:
    const ChainCosts& c_;
    int i_;
    bool recompute_;
    double inv_r_;                             // 1 / r
    double ar_per_byte_ = 0, ar_fixed_ = 0;    // allreduce: s per param byte, latency
    double in_s_ = 0;                          // the transfer in, fixed by i
    double out_per_byte_ = 0, out_fixed_ = 0;  // the transfer out: s per cut byte, latency
  };
  /// stage(i, j, first, r, downstream, recompute).memory_bytes.
  double memory(int i, int j, int r, int downstream, bool recompute = false) const;

 private:
  int n_;
  Topology topology_;
  std::vector<double> compute_, forward_, params_, acts_, cut_, inputs_;
  std::vector<TiedParam> tied_;
  // Per cut: what a stage after it stashes of its input (all of it, or with
  // Profile::stash_at_readers the received tensors counted nowhere else).
  std::vector<double> cut_stash_;
  /// The slowest link's bandwidth and latency over workers [first, first +
  /// count), for first <= N and count <= N + 1 (the DP asks millions of
  /// times; the topology walks its levels each time). Empty for large N.
  struct Link {
    double bandwidth, latency;
  };
  std::vector<Link> links_;
  int link_stride_ = 0;
  Link link(int first, int count) const;
  /// Per (first worker, replicas): the stage's costs per byte and fixed
  /// latencies, every division done (cost_model.h's formulas over r).
  struct StageLinks {
    double inv_r = 1;
    double ar_per_byte = 0, ar_fixed = 0;    // allreduce within [first, first + r)
    double in_per_byte = 0, in_fixed = 0;    // boundary before: [first - 1, first + r)
    double out_per_byte = 0, out_fixed = 0;  // boundary after: [first, first + r]
  };
  std::vector<StageLinks>
      stage_links_;  // (first, r) at first * link_stride_ + r; empty for large N
  StageLinks stage_links(int first, int r) const {
    if (!stage_links_.empty() && first >= 0 && r >= 1 && first + r <= link_stride_ - 2)
      return stage_links_[static_cast<size_t>(first * link_stride_ + r)];
    return compute_stage_links(first, r);
  }
  StageLinks compute_stage_links(int first, int r) const;
};

// Inline, with the formulas of cost_model.h whose divisions the (first, r)
// table has done ahead: the DP builds millions of timers and calls time()
// millions of times.
inline ChainCosts::StageTimer::StageTimer(const ChainCosts& costs, int i, int first, int r,
                                          bool recompute)
    : c_(costs), i_(i), recompute_(recompute) {
  const StageLinks s = costs.stage_links(first, r);
  inv_r_ = s.inv_r;
  ar_per_byte_ = s.ar_per_byte;
  ar_fixed_ = s.ar_fixed;
  if (i > 0) in_s_ = costs.cut(i - 1) * s.in_per_byte + s.in_fixed;
  out_per_byte_ = s.out_per_byte;
  out_fixed_ = s.out_fixed;
}

inline double ChainCosts::StageTimer::time(int j) const {
  const double compute_s = (c_.compute(i_, j) + (recompute_ ? c_.forward(i_, j) : 0.0)) * inv_r_;
  const double allreduce = allreduce_s(j);
  const double out_s = j < c_.n_ - 1 ? c_.cut(j) * out_per_byte_ + out_fixed_ : 0.0;
  const double slowest = std::max(std::max(compute_s, allreduce), std::max(in_s_, out_s));
  return c_.tied_.empty() ? slowest : slowest + c_.tied(i_, j);
}

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
