// Stage programs: the training graph cut into pipeline stages. Each stage gets
// a forward and a backward subgraph (valid ir::Graphs of their own) plus the
// tensors it must receive and send at each cut. A tensor crossing from stage
// a to stage b is one Transfer a -> b, never relayed through the stages in
// between (skip connections go straight to their consumer).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autodiff/training_graph.h"
#include "ir/graph.h"

namespace pipetrain::exec {

/// One tensor moved from the stage that produces it to one stage that reads it.
struct Transfer {
  std::string tensor;
  int from_stage = 0;
  int to_stage = 0;
  bool operator==(const Transfer&) const = default;
};

/// What one stage runs per microbatch. Forward phase: feed `forward` with the
/// data in `inputs` it reads and the tensors of `recv_fwd`; its outputs are
/// what `send_fwd` names, the `stash` it produced itself, and the training
/// graph's outputs computed here (the loss on the last stage, BatchNorm
/// running statistics). Backward phase: feed `backward` with its inputs,
/// which are all either `recv_bwd` tensors, `stash` tensors (kept per
/// microbatch from the forward phase: produced by `forward` or received in
/// `recv_fwd`) or data from `inputs`; its outputs are `send_bwd` tensors and
/// the gradients of the stage's params.
struct StageProgram {
  int stage = 0;
  int first_layer = 0, last_layer = 0;       // inclusive layer range of the training graph
  ir::Graph forward, backward;               // values shared with the training graph
  std::vector<Transfer> recv_fwd, send_fwd;  // activations (forward phase)
  std::vector<Transfer> recv_bwd, send_bwd;  // gradients (backward phase)
  /// Graph inputs (data, labels) this stage reads in either phase, in graph order.
  std::vector<std::string> inputs;
  /// Forward-phase tensors (own or received) this stage's backward reads.
  std::vector<std::string> stash;
  /// Params this stage reads and keeps (sorted). A param read by several
  /// stages (tied weights: GPT-2's token embedding and LM head) has a copy in
  /// each, listed in `shared`.
  std::vector<std::string> params;
  /// Tied param -> the stages holding a copy (sorted, this one included):
  /// after each backward they sum their gradients of it (each stage's is the
  /// sum of its own nodes' contributions) and apply the same update.
  std::map<std::string, std::vector<int>> shared;
  /// Owned param -> its gradient tensor (an output of `backward`).
  std::map<std::string, std::string> grads;
  /// Outputs of the training graph (loss, buffer updates) this stage's forward computes.
  std::vector<std::string> results;

  /// Zero-bubble schedules (split_backward() fills these): `backward` as two
  /// subgraphs. `backward_input` computes what `send_bwd` sends upstream
  /// (and nothing else it need not), `backward_weight` the rest: the param
  /// gradients. `carry` are the tensors the first computes and the second
  /// reads, kept per microbatch in between, plus param gradients the first
  /// computes on the way (a BatchNorm's, fused with its input gradient).
  /// (Received gradients the second reads are kept beside them.)
  ir::Graph backward_input, backward_weight;
  std::vector<std::string> carry;
};

/// Splits prog.backward into backward_input and backward_weight without
/// computing anything twice: a node goes to the input part when a sent
/// gradient depends on it; a convolution's gradient node, whose input and
/// weight gradients are separate computations, is split into one node for
/// each part.
void split_backward(StageProgram& prog);

/// Cuts `tg` into stages: `stage_layers[s]` is the inclusive [first, last]
/// layer range of stage s; the ranges must be contiguous from layer 0 and
/// cover every layer. Each node goes to the stage owning its layer (the loss,
/// appended to the last layer, to the last stage). Throws PlanError for bad
/// ranges or a node without a layer. A param read by two or more stages
/// gets a copy in each and its gradient split per stage (see `shared`).
std::vector<StageProgram> build_stage_programs(
    const autodiff::TrainingGraph& tg, const std::vector<std::pair<int, int>>& stage_layers);

}  // namespace pipetrain::exec
