// The single-worker training loop: epochs of shuffled minibatches through a
// Trainer, a test-set evaluation after each epoch, reports through callbacks
// (the CLI draws the progress bar and writes the metrics).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "executor/data_binding.h"
#include "executor/evaluate.h"
#include "executor/trainer.h"

namespace pipetrain::exec {

struct FitOptions {
  int64_t epochs = 1;
  uint64_t seed = 0;      // shuffling: epoch e uses seed + e
  int64_t max_steps = 0;  // stop after this many steps in all (0: run every epoch in full)
  bool evaluate = true;   // evaluate on the test split after each epoch
};

struct StepReport {
  int64_t step = 0;  // 0-based, over the whole run
  int64_t epoch = 0;
  int64_t batch = 0;  // 0-based within the epoch
  int64_t batches_per_epoch = 0;
  int64_t batch_size = 0;
  StepResult result;
  double seconds = 0;  // since the run began
};

struct EpochReport {
  int64_t epoch = 0;
  double train_loss = 0;  // mean over the epoch's steps
  EvalResult test;        // samples = 0 when not evaluated
  double seconds = 0;     // this epoch's training time (evaluation excluded)
  double samples_per_s = 0;
};

struct FitCallbacks {
  std::function<void(const StepReport&)> on_step;
  std::function<void(const EpochReport&)> on_epoch;
};

/// Trains `trainer` on data.train; `model` (sharing the trainer's params) is
/// evaluated on data.test. `data` is bound to the training graph (see
/// bind_dataset); `binding` says which inputs its arrays and labels feed.
/// Batches of a partial size are dropped (the graph's shapes are static).
std::vector<EpochReport> fit(Trainer& trainer, const autodiff::TrainingGraph& tg,
                             const ir::Graph& model, Backend& backend, const DataBinding& binding,
                             const data::DataSplit& data, const FitOptions& options,
                             const FitCallbacks& callbacks = {});

/// The test-set evaluation after an epoch, when the training graph has an
/// attached loss to score (a model's own loss is not evaluated).
EvalResult evaluate_epoch(const autodiff::TrainingGraph& tg, const ir::Graph& model,
                          Backend& backend, const DataBinding& binding, const data::Dataset& test);

}  // namespace pipetrain::exec
