// From a model graph to the graph one training step runs: BatchNormalization
// switched to batch statistics (its running statistics become outputs that
// update the buffers), a loss (the model's own, or cross-entropy / MSE
// attached to an output with the labels as a new input), and the backward pass.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace pipetrain::autodiff {

struct LossSpec {
  /// "" uses the model's own loss (its one-element float output);
  /// "cross-entropy" (SoftmaxCrossEntropyLoss, mean) or "mse" attaches one.
  std::string kind;
  /// The model output the attached loss reads; default: the first output.
  std::string output;
  /// cross-entropy on logits of rank 3 or more: true when the classes are the
  /// last axis (a language model's (N, T, V) with labels (N, T)), false for
  /// ONNX's (N, C, d1, ...) with labels (N, d1, ...).
  bool classes_last = false;
  /// cross-entropy: labels equal to this add nothing; the mean is over the others.
  int64_t ignore_index = -100;
};

/// The scalar f32 input an attached cross-entropy is multiplied by. One
/// worker feeds 1. A pipelined step of m microbatches feeds microbatch j
/// m c_j / C, c_j its labels that count (not ignore_index) and C the step's:
/// the mean over microbatches is then the minibatch's mean over its labels,
/// as one worker computes it, even when padding leaves the counts uneven.
inline constexpr const char* kLossWeight = "loss/weight";

struct TrainingGraph {
  ir::Graph graph;         // forward in training mode + loss + backward; shares value buffers
  std::string loss;        // the scalar loss tensor
  std::string prediction;  // the model output the loss reads ("" for a model's own loss)
  std::string labels;      // the label input attach added ("" for a model's own loss)
  std::string loss_weight;  // kLossWeight for an attached cross-entropy, else empty
  /// Attached cross-entropy: the number of classes, the prediction's class axis and the
  /// ignored label id (0 classes for mse and a model's own loss).
  int64_t classes = 0;
  int64_t class_axis = 1;
  int64_t ignore_index = -100;
  std::map<std::string, std::string> grads;  // param -> its gradient tensor
  /// (tensor the step computes, buffer it replaces): BatchNorm running statistics.
  std::vector<std::pair<std::string, std::string>> buffer_updates;
};

/// Builds the training graph of `model`; values (params, buffers) share their
/// buffers with `model`'s, so updating them in place trains `model` itself.
/// Throws ModelError when there is no loss to use or the output is unknown.
TrainingGraph build_training_graph(const ir::Graph& model, const LossSpec& loss);

}  // namespace pipetrain::autodiff
