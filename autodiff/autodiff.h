// Reverse-mode autodiff over the IR: appends the backward pass of a scalar
// loss to a graph, written in IR ops (and the fused gradient ops of
// ir/ops/grad.cc), so the backward pass is itself a graph that the executor,
// profiler and partitioner treat like any other.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace pipetrain::autodiff {

struct BackwardOptions {
  /// Tensors to differentiate with respect to; empty means every kParam.
  std::vector<std::string> wrt;
};

struct BackwardResult {
  /// For each tensor of `wrt` that the loss depends on: the name of its
  /// gradient (role kGrad, the tensor's shape). A param the loss does not
  /// depend on is absent.
  std::map<std::string, std::string> grads;
  size_t forward_nodes = 0;   // nodes before the pass
  size_t backward_nodes = 0;  // nodes it appended
};

/// Appends d(loss)/d(wrt) to `g` (nodes marked Node::backward, each in the
/// layer of the forward node it differentiates) and adds the gradients to
/// g.outputs. `loss` must be a float tensor with one element. Only gradients
/// on a path from a `wrt` tensor to the loss are computed. Throws ModelError
/// for a bad loss and UnsupportedOp naming the node for an op or attribute
/// without a gradient rule.
BackwardResult build_backward(ir::Graph& g, const std::string& loss,
                              const BackwardOptions& options = {});

/// True when a gradient rule (or an explicit "no gradient" entry) exists for op.
bool has_gradient_rule(const std::string& op_type);

}  // namespace pipetrain::autodiff
