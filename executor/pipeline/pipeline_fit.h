// The pipelined training loop: epochs of shuffled minibatches through a
// Pipeline, cut into rounds, with evaluation after each epoch, checkpoints at
// round boundaries and a stop request honoured at the next boundary.
//
// A step is one optimizer update and one loader minibatch: flush schedules
// and 2bw cut the minibatch into the pipeline's microbatches; pipedream runs
// each minibatch whole. Rounds end at epoch ends, at multiples of
// `checkpoint_every` and `round_limit` steps (counted over the whole run, so
// a resumed run cuts the same rounds) and at max_steps.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "data/dataset.h"
#include "executor/fit.h"
#include "executor/pipeline/pipeline.h"

namespace pipetrain::exec {

struct PipelineFitOptions {
  int64_t epochs = 1;
  uint64_t seed = 0;      // shuffling: epoch e uses seed + e
  int64_t max_steps = 0;  // stop after this many steps in all (0: every epoch in full)
  bool evaluate = true;
  int64_t minibatch = 0;                    // samples per step
  int64_t round_limit = 128;                // asynchronous schedules: steps per round at most
  int64_t checkpoint_every = 0;             // steps; 0: none
  int64_t start_step = 0;                   // steps already done (resuming)
  const std::atomic<bool>* stop = nullptr;  // set (Ctrl-C): stop at the next round boundary
};

struct PipelineFitCallbacks {
  std::function<void(const StepReport&)> on_step;
  std::function<void(const EpochReport&)> on_epoch;
  /// After every round (the last one's ops make the timeline).
  std::function<void(const RoundResult&)> on_round;
  /// At a checkpoint boundary (and when stopped); `step` steps are done.
  std::function<void(int64_t step)> on_checkpoint;
};

struct PipelineFitResult {
  std::vector<EpochReport> epochs;
  int64_t steps = 0;  // done in all, start_step included
  bool stopped = false;
  double train_seconds = 0;  // rounds only, evaluation excluded
  int64_t samples = 0;       // trained in this run
};

/// Trains `pipe` (built on `tg` at the microbatch size) on data.train;
/// `model` (whose values pipe.write_back() updates through tg) is evaluated on
/// data.test. `data` is bound to the training graph (bind_dataset) as
/// `binding` says.
PipelineFitResult fit_pipeline(Pipeline& pipe, autodiff::TrainingGraph& tg, const ir::Graph& model,
                               Backend& backend, const DataBinding& binding,
                               const data::DataSplit& data, const PipelineFitOptions& options,
                               const PipelineFitCallbacks& callbacks = {});

/// Rows [first, first + rows) of a tensor (a copy).
ir::Tensor slice_rows(const ir::Tensor& t, int64_t first, int64_t rows);

/// Adds tg.loss_weight to the m microbatch feeds of one step: m c_j / C, with c_j the
/// labels of microbatch j not equal to tg.ignore_index (autodiff::kLossWeight).
void weigh_microbatches(TensorMap* parts, int64_t m, const std::string& labels,
                        const autodiff::TrainingGraph& tg);

}  // namespace pipetrain::exec
