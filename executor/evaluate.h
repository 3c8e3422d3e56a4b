// Test-set evaluation of a model graph (inference mode: BatchNorm on its
// running statistics, no dropout): mean loss and, for classifiers, accuracy,
// over samples or, for per-token labels, over the positions not ignored.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "executor/backend.h"
#include "ir/graph.h"

namespace pipetrain::exec {

struct EvalResult {
  double loss = 0;      // mean cross-entropy (classification) or mean squared error
  double accuracy = 0;  // share of argmax hits (classification only)
  int64_t samples = 0;
  int64_t scored = 0;         // labels scored: samples, or positions not ignored
  bool has_accuracy = false;  // a classifier was evaluated
};

struct EvalSpec {
  bool classification = true;  // cross-entropy and accuracy; else mean squared error
  int64_t class_axis = 1;      // the prediction's class axis (1, or the last for (N, T, V))
  int64_t ignore_index = -100;
};

/// Runs `model` over `test` (bound to it: arrays keyed by the names in
/// `inputs`) in batches of the model's (static) batch size, reading
/// `prediction`; the last partial batch is padded with zeros and the padding
/// ignored. ModelError when an array's sample shape does not match its input.
/// `progress`, when given, hears (samples done, samples) after every batch.
EvalResult evaluate(const ir::Graph& model, Backend& backend,
                    const std::vector<std::string>& inputs, const std::string& prediction,
                    const data::Dataset& test, const EvalSpec& spec = {},
                    const std::function<void(int64_t done, int64_t total)>& progress = {});

}  // namespace pipetrain::exec
