// A measured profile of a training graph on the CPU backend: every node of a
// training step (forward, loss, backward) timed over a few steps, and, given
// an optimizer, one update of each layer's params. Shared by
// `pipetrain profile --device measured`, the pipelined `pipetrain train`
// (which partitions and predicts from it) and the pipeline benchmark.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "autodiff/training_graph.h"
#include "executor/backend.h"
#include "executor/optim/optimizer.h"
#include "partitioner/profile.h"

namespace pipetrain::exec {

/// `feeds` covers the training graph's inputs (data and labels). Layer times
/// are per-node medians, scaled so that they sum to the median wall time of
/// a whole run (the runner's own costs spread over the layers). With
/// `optimizer`, each layer's update_s is the median time of one update of
/// the params its nodes read. With `neighbours` > 0, that many copies of the
/// step run on other threads while the nodes are timed: the other workers of
/// a pipeline sharing the machine, whose contention the layer times then include.
/// `make_backend` times the nodes on another backend than the CPU's fp32 one
/// (the one the workers run: a GPU's, or the CPU's in bf16), the neighbours too.
partitioner::Profile measure_training_profile(
    const autodiff::TrainingGraph& tg, const std::map<std::string, ir::Tensor>& feeds, int warmup,
    int runs, const OptimizerConfig* optimizer = nullptr, int neighbours = 0,
    const std::function<std::unique_ptr<Backend>()>& make_backend = {});

/// Multiplies times and bytes by `factor` and sets the batch accordingly: a
/// profile measured on one microbatch, stated for a minibatch of `factor`
/// microbatches (the simulator divides it again), so that the prediction
/// keeps the microbatch's own efficiency. update_s is per step: unchanged.
void scale_profile(partitioner::Profile& p, int factor);

}  // namespace pipetrain::exec
