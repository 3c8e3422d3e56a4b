// Tied params under asynchronous 1F1B without the wait. Stages holding copies
// of a shared param (GPT's token embedding and LM head) must apply the same
// update to stay equal. Summing their partial gradients of the same minibatch
// makes the last stage of the group wait at every update for the first
// stage's backward of that minibatch, (p - 1) backward hops later: on the
// 2-stage demo GPT each worker idled a third of the time, and the pipeline
// ran slower than one worker. Here each update of stage s's copy instead
// takes the partial of stage s' from update k - (h - s') (h: the group's last
// stage), which stage s' sent at that earlier update: every copy sums the
// same partials in the same order (stage, then update), so the copies stay
// bitwise equal, and nothing waits in steady state. Within PipeDream's
// semantics this is one more staleness: the first stage's part of the tied
// gradient arrives h - s' updates late. A round's last update takes every
// partial not applied yet, so a round boundary (checkpoint, evaluation)
// leaves nothing pending.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "executor/comm/communicator.h"
#include "ir/tensor.h"
#include "partitioner/schedule.h"

namespace pipetrain::exec {

/// One worker's partials of its own that later updates still take.
class DelayedTies {
 public:
  /// At update `step` (0-based in a round of `count`; `base` is the round's
  /// first message id) of `stage`'s copy of `param`, held by `stages`:
  /// sends `grad` (this update's partial) to the other holders, then
  /// overwrites it with the sum this update applies. `worker_of(stage)`
  /// names a holder's rank.
  void exchange(Communicator& comm, const std::function<int(int stage)>& worker_of, int stage,
                const std::string& param, const std::vector<int>& stages, int step, int count,
                int64_t base, ir::Tensor& grad);

 private:
  std::map<std::pair<int, std::string>, std::map<int, ir::Tensor>> own_;  // (stage, param) -> step
};

}  // namespace pipetrain::exec
