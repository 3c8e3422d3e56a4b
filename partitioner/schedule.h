// Schedules as data: per worker, an ordered list of ops (forward,
// backward, split backward, send, receive, allreduce, optimizer step), for
// pipeline positions ("stages"; virtual stages when a worker holds several
// chunks). The simulator times them; the executor can run the same lists.
// execute() is the one interpreter: a discrete-event run where sends are
// asynchronous (they queue on the link from sender to receiver), receives
// block until the data has arrived. An allreduce runs on each replica's
// collective stream, overlapping compute: it starts when every replica of its
// stage has issued it and their streams are free; the Step of the same stage
// and round waits for it (asynchronous schedules place that Step one round
// later, so the allreduce overlaps the next round's compute). Stages tied by
// a shared parameter meet at their Steps of the same index: each Step starts
// when the last of them arrives, after the tied gradients' allreduce (the
// executor's blocking sum). validate() proves a schedule complete and
// deadlock-free by executing it with unit costs.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace pipetrain::partitioner {

enum class OpKind {
  kForward,
  kBackward,        // input and weight gradients together
  kBackwardInput,   // input gradient only (zero-bubble schedules)
  kBackwardWeight,  // weight gradient only, may be delayed
  kSend,
  kRecv,
  kAllreduce,  // gradients among the replicas of `stage`, non-blocking; `microbatch` is the round
  kStep,       // optimizer update of `stage`, after its allreduce; `microbatch` is the step index
};
enum class Payload { kActivation, kGradient };

/// The microbatch of a W op that computes the weight gradients of every
/// microbatch its worker ran this step at once (Schedule::batched_weights).
constexpr int kWholeStep = -1;

struct ScheduleOp {
  OpKind kind = OpKind::kForward;
  int stage = 0;
  int microbatch = 0;
  /// Send/Recv: an activation produced by F(stage) or a gradient produced by
  /// B(stage); `stage` is always the producer's.
  Payload payload = Payload::kActivation;
  int peer = -1;  // Send: receiving worker; Recv: sending worker
};

/// "F3.2" (forward of stage 3, microbatch 2), "Send(act 3.2 -> w5)", ...
std::string to_string(const ScheduleOp& op);

struct Schedule {
  std::string name;
  int num_stages = 0;
  int num_microbatches = 0;
  bool split_backward = false;  // B is input-only and every microbatch has a W
  /// Per stage (empty: none): the stage's B's are input-only and one W
  /// (microbatch kWholeStep) after all of them computes the step's weight
  /// gradients at the minibatch size (wide products instead of one narrow
  /// product per microbatch).
  std::vector<bool> batched_weights;
  bool batched(int stage) const {
    return stage >= 0 && stage < static_cast<int>(batched_weights.size()) &&
           batched_weights[static_cast<size_t>(stage)];
  }
  /// Whether stage `stage`'s backward runs as B (input) then W ops.
  bool split(int stage) const { return split_backward || batched(stage); }
  std::vector<std::vector<int>> stage_workers;    // stage -> its replicas' workers
  std::vector<std::vector<ScheduleOp>> programs;  // worker -> ops in order
  /// Stages whose Steps of the same index meet (every replica of each), then
  /// update together: stages holding copies of a tied parameter, or all
  /// stages when the update needs the global gradient norm.
  std::vector<std::vector<int>> tied_groups;
  /// The tied groups exchange delayed partial gradients instead of meeting
  /// (tied_gradients_delayed()): the Step k of stage s waits only for the
  /// partial each other stage s' of its group sent at its Step
  /// k - tied_delay(group, s'), and a round's last Step for every partial.
  bool tied_delayed = false;
};

/// How many updates late stage `from`'s partial gradient of a tied param
/// reaches the copies held by `stages`: its distance from the last of them.
int tied_delay(const std::vector<int>& stages, int from);

/// Durations for execute(); any may be left empty (zero).
struct ScheduleCosts {
  std::function<double(int worker, const ScheduleOp& op)> compute;  // F, B, W, Step
  std::function<double(int from, int to, const ScheduleOp& send)> transfer;
  std::function<double(int stage, int round)> allreduce;
  /// The gradient allreduce of tied group `group` (blocking, before the Steps).
  std::function<double(int group)> tied_allreduce;
  /// Bytes one microbatch stashes on `stage` (for peak memory); empty: 1.
  std::function<double(int stage)> activation_bytes;
  /// Bytes a microbatch keeps from its B op to its W op (split backward);
  /// null: none.
  std::function<double(int stage)> carry_bytes;
  /// Of activation_bytes, what a split backward's W reads (kept from B to
  /// W; the rest is freed at B); null: all of it.
  std::function<double(int stage)> weight_activation_bytes;
};

struct TimedOp {
  int worker = 0;
  ScheduleOp op;
  double start = 0, end = 0;
};
struct TimedTransfer {
  int from = 0, to = 0;
  ScheduleOp op;  // the Send
  double start = 0, end = 0;
};

struct ScheduleRun {
  double makespan = 0;
  std::vector<TimedOp> ops;  // compute ops in execution order, allreduces when they are placed
  std::vector<TimedTransfer> transfers;
  std::vector<double> busy_s;                 // per worker: F, B, W time
  std::vector<int> peak_in_flight;            // per worker: microbatches stashed at once
  std::vector<double> peak_activation_bytes;  // per worker
  std::vector<int> peak_weight_versions;      // per worker, largest over its stages
};

/// Runs the schedule. Throws PlanError naming every blocked worker's next op
/// when it deadlocks.
ScheduleRun execute(const Schedule& s, const ScheduleCosts& costs);

/// Structural checks (every F and B, or B and W, of every stage and
/// microbatch exactly once (batched weights: one W per stage, after its
/// B's), on a replica of its stage, F before B before W,
/// each F/B of a stage > 0 / < last preceded by its Recv, every Send matched
/// by one Recv) and a unit-cost execution. Throws PlanError naming the op.
void validate(const Schedule& s);

}  // namespace pipetrain::partitioner
