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
#include <utility>
#include <vector>

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

/// `p` (measure_training_profile() of `tg`) with each stage's layer times
/// rescaled so that the stage's forward, backward and update sum to what
/// its own program takes on a StageWorker, as a pipeline worker runs it
/// (medians of `runs` after `warmup`, beside `neighbours` busy threads): the
/// stash kept in its own buffers, gradients into accumulators, the seal, the
/// received tensors' handling. The whole graph's run is faster than its
/// stages' (the demo GPT's stages took 7-11% longer), which made the
/// prediction too high. `ranges`: each stage's inclusive layer range;
/// `feeds` the training graph's data inputs (received tensors are random).
/// The update is timed with what the pipeline does around it (the seal, the
/// finite check, the gradient's squared norm). `split_backward`: the backward
/// runs as B and W (ZB-H1, ZB-H2, the V's), each timed, and B's measured share
/// becomes the layers' backward_input_s.
partitioner::Profile calibrate_to_stages(
    partitioner::Profile p, const autodiff::TrainingGraph& tg,
    const std::vector<std::pair<int, int>>& ranges, const std::map<std::string, ir::Tensor>& feeds,
    const OptimizerConfig& optimizer, int warmup, int runs, int neighbours = 0,
    const std::function<std::unique_ptr<Backend>()>& make_backend = {},
    bool split_backward = false);

/// Sets the layers' backward_weight_step_s (batched weight gradients): each
/// stage's weight half of the backward (split_backward()) timed on a
/// StageWorker of `minibatch_tg`, the training graph at the whole
/// minibatch's size (`feeds`: its data inputs), medians of `runs` after
/// `warmup`, shared by the stage's layers as their weight parts of backward_s.
void measure_weight_steps(partitioner::Profile& p, const autodiff::TrainingGraph& minibatch_tg,
                          const std::vector<std::pair<int, int>>& ranges,
                          const std::map<std::string, ir::Tensor>& feeds,
                          const OptimizerConfig& optimizer, int warmup, int runs,
                          int neighbours = 0,
                          const std::function<std::unique_ptr<Backend>()>& make_backend = {});

/// Multiplies times and bytes by `factor` and sets the batch accordingly: a
/// profile measured on one microbatch, stated for a minibatch of `factor`
/// microbatches (the simulator divides it again), so that the prediction
/// keeps the microbatch's own efficiency. update_s is per step: unchanged.
void scale_profile(partitioner::Profile& p, int factor);

}  // namespace pipetrain::exec
