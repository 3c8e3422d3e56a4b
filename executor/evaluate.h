// Test-set evaluation of a model graph (inference mode: BatchNorm on its
// running statistics, no dropout): mean loss and, for classifiers, accuracy.
#pragma once

#include <string>

#include "data/dataset.h"
#include "executor/backend.h"
#include "ir/graph.h"

namespace pipetrain::exec {

struct EvalResult {
  double loss = 0;      // mean cross-entropy (classification) or mean squared error
  double accuracy = 0;  // share of argmax hits (classification only)
  int64_t samples = 0;
  bool has_accuracy = false;  // a classifier was evaluated
};

/// Runs `model` over `test` in batches of the model's (static) batch size,
/// feeding the features to `input` and reading `prediction`; the last partial
/// batch is padded and the padding ignored. ModelError when the dataset's
/// sample shape does not match the input.
EvalResult evaluate(const ir::Graph& model, Backend& backend, const std::string& input,
                    const std::string& prediction, const data::Dataset& test);

}  // namespace pipetrain::exec
