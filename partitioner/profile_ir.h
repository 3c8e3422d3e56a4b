// Profiles of an ir::Graph: the per-layer structure read off the IR (output
// bytes, cut bytes with skip connections, parameter bytes, layer edges) plus
// times from a device roofline (analytic) or from timed runs (measured).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "partitioner/device_spec.h"
#include "partitioner/profile.h"

namespace pipetrain::partitioner {

/// Per layer of g: bytes of every activation produced by a forward node at or
/// before the layer and read by a forward node after it. Graph inputs are not
/// counted (the data loader feeds each stage directly), nor parameters (they
/// live on their stage). Throws ModelError naming the tensor if a layer reads
/// a tensor produced by a later layer.
std::vector<int64_t> cut_bytes_per_layer(const ir::Graph& g);

/// The profile with everything but the times: names, node names, output,
/// cut and parameter bytes, layer edges. g.layers must be set.
Profile structural_profile(const ir::Graph& g);

struct AnalyticOptions {
  /// Use the TF32 tensor-core peak for Conv, Gemm, MatMul and LSTM when the
  /// device has one (PyTorch's default for convolutions on Ampere and later).
  bool tf32 = false;
};

/// Roofline per node: overhead + max(FLOPs / peak, bytes moved / bandwidth),
/// FLOPs from ir::node_flops, bytes = all inputs and outputs. Backward nodes
/// (Node::backward) are timed the same way into backward_s; without any,
/// backward is 2 x forward (two GEMMs per forward GEMM) and
/// backward_estimated is set.
Profile analytic_profile(const ir::Graph& g, const DeviceSpec& device,
                         const AnalyticOptions& options = {});

/// Runs the graph once and fills node_seconds (indexed like g.nodes).
using NodeTimer = std::function<void(std::vector<double>& node_seconds)>;

/// Calls `run_once` `warmup` times, then `runs` times; each node's time is
/// the median over the timed runs, summed per layer (backward nodes into
/// backward_s; without any, backward = 2 x forward, flagged). `device` names
/// the backend in the profile.
Profile measured_profile(const ir::Graph& g, const NodeTimer& run_once, int warmup, int runs,
                         const std::string& device);

}  // namespace pipetrain::partitioner
