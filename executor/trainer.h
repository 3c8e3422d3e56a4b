// One worker's training step: forward, loss and backward through the
// training graph, gradient clipping, the optimizer update of the params in
// place and the BatchNorm buffer updates. The pipelined executor runs the
// same pieces per stage.
#pragma once

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autodiff/training_graph.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "executor/optim/optimizer.h"

namespace pipetrain::exec {

struct TrainerOptions {
  OptimizerConfig optimizer;
  LrSchedule schedule;
  double clip_norm = 0;  // clip the global gradient norm to this; 0 = no clipping
  uint64_t seed = 0;     // dropout masks: step s uses seed + s
  /// When set, each node's wall time is added here (indexed like the training graph's nodes).
  std::vector<double>* node_seconds = nullptr;
};

struct StepResult {
  double loss = 0;
  double grad_norm = NAN;  // before clipping; NaN where no run measured it
  double lr = 0;
};

class Trainer {
 public:
  /// Adds the optimizer state to tg.graph. Throws UnsupportedOp listing every
  /// node the backend cannot run.
  Trainer(autodiff::TrainingGraph& tg, Backend& backend, TrainerOptions options);

  /// One step on one minibatch. Throws RuntimeFault naming the step when the
  /// loss or the gradient norm is not finite (the params are left untouched).
  StepResult step(const std::map<std::string, ir::Tensor>& feeds);

  int64_t steps_done() const { return steps_; }
  /// The arena layout of the step's activations and gradients.
  const MemoryPlan& memory_plan() const { return *runner_.memory_plan(); }

 private:
  autodiff::TrainingGraph& tg_;
  TrainerOptions options_;
  ForwardRunner runner_;
  std::unique_ptr<Optimizer> optimizer_;
  int64_t steps_ = 0;
};

}  // namespace pipetrain::exec
