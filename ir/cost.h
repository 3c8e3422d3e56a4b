// Static cost figures read off the IR: FLOPs per node, and per layer its
// parameters, FLOPs and the bytes of activations leaving it. Shared by
// `pipetrain inspect` and the analytic profiler.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace pipetrain::ir {

/// Forward floating-point operations of one node (a multiply-add counts 2).
int64_t node_flops(const Graph& g, const Node& n);

struct LayerStats {
  std::string name;
  size_t num_nodes = 0;
  int64_t params = 0;            // trainable elements read by the layer's nodes
  int64_t flops = 0;             // forward
  int64_t activation_bytes = 0;  // outputs read outside the layer or by the graph
};

/// One entry per layer of g (g.layers must be set).
std::vector<LayerStats> layer_stats(const Graph& g);

}  // namespace pipetrain::ir
