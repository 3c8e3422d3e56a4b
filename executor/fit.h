// The single-worker training loop: epochs of shuffled minibatches through a
// Trainer, a test-set evaluation after each epoch, reports through callbacks
// (the CLI draws the progress bar and writes the metrics).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
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

/// The training graph's input that takes the labels: the one the loss
/// attachment added, else the model's input other than `input`.
std::string label_input(const autodiff::TrainingGraph& tg, const std::string& input);
/// ModelError naming the shapes when the dataset's samples or labels do not
/// fit the training graph's input and label input.
void check_dataset(const autodiff::TrainingGraph& tg, const std::string& input,
                   const data::Dataset& train);

/// Trains `trainer` on data.train; `model` (sharing the trainer's params) is
/// evaluated on data.test. `input` is the model input fed with the features;
/// labels go to the training graph's label input (or the model's second input
/// when it brings its own loss). Batches of a partial size are dropped (the
/// graph's shapes are static).
std::vector<EpochReport> fit(Trainer& trainer, const autodiff::TrainingGraph& tg,
                             const ir::Graph& model, Backend& backend, const std::string& input,
                             const data::DataSplit& data, const FitOptions& options,
                             const FitCallbacks& callbacks = {});

}  // namespace pipetrain::exec
