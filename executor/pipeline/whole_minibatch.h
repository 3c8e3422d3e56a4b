// --bn-stats minibatch: a stage whose BatchNorm must normalise with the
// whole minibatch's statistics runs a step's microbatches at once, on its
// program cut from the training graph built at the minibatch size (the
// other stages keep running microbatch by microbatch). These helpers join
// the microbatches' tensors into the minibatch's and cut its results back.
#pragma once

#include <string>
#include <vector>

#include "executor/pipeline/stage_worker.h"
#include "executor/stage_program.h"
#include "ir/graph.h"

namespace pipetrain::exec {

/// True when `g` normalises with batch statistics (a training-mode
/// BatchNormalization): a stage's forward, or a whole training graph.
bool has_batch_statistics(const ir::Graph& g);

/// Joins the feeds of a step's microbatches (in order) for `whole`, the
/// minibatch program's subgraph (a whole-minibatch stage's, or a batched
/// weight gradient's): a tensor whose shape there has m times the
/// rows along axis 0 is concatenated; one of the same shape in every
/// microbatch (no batch axis) is taken from the first; names `whole` does not
/// know are left out. Throws RuntimeFault naming a tensor that fits neither.
TensorMap join_microbatches(const std::vector<TensorMap>& parts, const ir::Graph& whole);

/// Cuts `t`, computed for the minibatch, into m tensors of the microbatch
/// shape `micro`: along axis 0, or the same tensor m times when the shapes
/// are equal. Each part is multiplied by `scale` (float tensors) when it is
/// not 1. Throws RuntimeFault naming `name` when neither fits.
std::vector<ir::Tensor> cut_minibatch(const std::string& name, const ir::Tensor& t,
                                      const ir::Shape& micro, int m, double scale = 1.0);

/// Throws PlanError when the two programs of stage `stage` (microbatch and
/// minibatch graphs) do not send and receive the same tensors.
void check_same_transfers(const StageProgram& micro, const StageProgram& whole);

/// Batched weight gradients: throws PlanError unless the weight half of
/// `micro`'s backward can run once over a step as `whole`'s (both split, the
/// same stage at the microbatch and the minibatch size): the same inputs and
/// param gradients, and every input stacked along axis 0 by one factor, the
/// microbatch count, so that the joined microbatches are the minibatch. (An
/// input without a batch axis, such as a per-microbatch statistic, would
/// differ between microbatches.)
void check_batched_weights(const StageProgram& micro, const StageProgram& whole);

}  // namespace pipetrain::exec
