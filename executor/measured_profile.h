// A measured profile of a training graph on the CPU backend: every node of a
// training step (forward, loss, backward) timed over a few steps. Shared by
// `pipetrain profile --device measured`, the pipelined `pipetrain train`
// (which partitions and predicts from it) and the pipeline benchmark.
#pragma once

#include <map>
#include <string>

#include "autodiff/training_graph.h"
#include "partitioner/profile.h"

namespace pipetrain::exec {

/// `feeds` covers the training graph's inputs (data and labels).
partitioner::Profile measure_training_profile(const autodiff::TrainingGraph& tg,
                                              const std::map<std::string, ir::Tensor>& feeds,
                                              int warmup, int runs);

}  // namespace pipetrain::exec
