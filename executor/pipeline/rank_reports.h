// What the ranks of a multi-process pipeline (--comm mpi) tell rank 0 after
// a round: losses, op timings and worker statistics, and at write-back the
// stage state. Every rank calls these functions at the same point (they are
// collective over the communicator); rank 0 gets everyone's, the others
// send theirs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "executor/backend.h"
#include "executor/comm/communicator.h"
#include "ir/graph.h"
#include "partitioner/schedule.h"

namespace pipetrain::exec {

/// Per worker, over the pipeline's life.
struct WorkerStats {
  int stage = 0, replica = 0;
  int peak_in_flight = 0;        // microbatches stashed at once
  int peak_weight_versions = 1;  // weight versions alive at once
  size_t peak_stash_bytes = 0;
  // What the worker holds besides its stash: one weight version's bytes (the
  // peak above holds that many), the gradient accumulators (several sets
  // when asynchronous updates keep one sealed while the next fills) and
  // the optimizer state.
  size_t param_bytes = 0, peak_gradient_bytes = 0, optimizer_bytes = 0;
  // --clip-norm's post-validation: updates taken before the global norm was known,
  // and those of them redone because it clipped.
  int provisional_updates = 0, redone_updates = 0;
  size_t before_update_bytes = 0;  // the weights and optimizer state kept for a redo
  // A device backend's ledger (executor/backend.h): its totals after the rounds run
  // so far, and after the second (its caches are warm from there on).
  int rounds = 0;
  TransferStats ledger, ledger_warm;
  /// Peak bytes: stash, weight versions, gradients and optimizer state.
  size_t peak_bytes() const {
    return peak_stash_bytes + static_cast<size_t>(peak_weight_versions) * param_bytes +
           peak_gradient_bytes + optimizer_bytes + before_update_bytes;
  }
};

/// One optimizer update's squared gradient norm on one stage replica (its
/// sealed gradients as the update scales them; tied params on their lowest
/// stage only).
struct GradSquares {
  int stage = 0, replica = 0;
  int64_t update = 0;  // the Step op's index in its round
  double sum_sq = 0;
};

/// One worker's round.
struct WorkerReport {
  int worker = 0;
  std::vector<std::pair<int64_t, double>> losses;  // (microbatch, loss)
  std::vector<GradSquares> grad_sq;
  std::vector<partitioner::TimedOp> ops;
  double busy_s = 0;
  WorkerStats stats;
};

/// Rank 0 returns every rank's reports (its own first, then by rank); the
/// others return their own. `round` makes the messages' tags unique.
std::vector<WorkerReport> gather_reports(Communicator& comm, int64_t round,
                                         std::vector<WorkerReport> mine);

/// A value of a stage's state: a param, a BatchNorm buffer or optimizer state.
struct StateValue {
  std::string name;
  ir::Role role = ir::Role::kParam;
  ir::Tensor value;
};

/// Rank 0 returns the values every other rank sends (in rank order); the
/// others send `mine` and return nothing.
std::vector<StateValue> gather_state(Communicator& comm, int64_t round,
                                     const std::vector<StateValue>& mine);

/// Rank 0's `text` on every rank (`what` names the message).
std::string share_text(Communicator& comm, const std::string& what, const std::string& text);

/// Rank 0 returns every rank's `mine` in rank order; the others return nothing.
std::vector<std::string> gather_text(Communicator& comm, const std::string& what,
                                     const std::string& mine);

/// True on every rank when `flag` is true on any rank.
bool any_rank(Communicator& comm, bool flag);

}  // namespace pipetrain::exec
