// Which intermediate tensors a run stores in the backend's blocked
// activation layout. oneDNN's convolutions compute in a channel-blocked
// layout (nChw8c on AVX2, nhwc on AVX-512), so a row-major (N, C, H, W)
// activation costs a reorder in and another out of every convolution (45 ms
// of a 272 ms ResNet-18 forward on one AVX-512 core). Where a tensor flows
// only between kernels that can take the blocked layout, it is stored that
// way instead and the reorders disappear.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "ir/graph.h"

namespace pipetrain::exec {

/// Per node (indexed like g.nodes): bit i set when input i, and when output
/// k, is stored blocked (KernelContext::blocked_inputs/outputs).
struct LayoutPlan {
  std::vector<uint32_t> inputs, outputs;
  std::set<std::string> tensors;  // the blocked tensors
  bool empty() const { return tensors.empty(); }
};

/// The largest set of activations the backend calls blockable(), produced at
/// a port a node's layout_access() lets write blocked, such that every reader
/// can take them blocked: a kConvLike node at ports its mask names, or a kSameLayout node
/// whose other non-scalar inputs and output 0 are in the set too. Tensors in
/// `plain` (graph outputs, buffers handed to the caller) stay row-major,
/// and so does everything when the backend allows nothing.
LayoutPlan plan_blocked_layout(const ir::Graph& g, const Backend& backend,
                               const std::set<std::string>& plain);

}  // namespace pipetrain::exec
