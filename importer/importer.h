// ONNX ModelProto -> ir::Graph, and back.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "ir/graph.h"

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace pipetrain::importer {

struct ImportOptions {
  /// Binds every symbolic (or unknown) dimension of the graph inputs that is
  /// the leading dimension; other symbolic dimensions are an error naming them.
  std::optional<int64_t> batch;
  /// Explicit shapes for named inputs; wins over `batch`.
  std::map<std::string, ir::Shape> input_shapes;
  /// 0: one node per layer; k > 0: group nodes by the first k scopes of their
  /// names ("/layer1/layer1.0/conv1/Conv" at depth 2 is layer "layer1.0").
  int layer_depth = 0;
  /// Graph inputs bound to fixed values: they become constants (Role::kConstant)
  /// instead of inputs, so shape-deciding inputs (a Reshape's shape fed at run
  /// time, as in ONNX's node tests) are known at import. Dtype and static
  /// dimensions must match the model's declaration.
  std::map<std::string, ir::Tensor> input_values;
  /// Fold static shape subgraphs (Shape, Gather, Concat, Unsqueeze, ... on constants).
  bool fold_constants = true;
  /// Import float16 and bfloat16 models as float32 (training's float32 master
  /// weights; save_trained_weights rounds back to the file's dtype). float64
  /// is always imported as float32.
  bool half_as_float32 = false;
  /// Rewrite exporters' op chains into fused ops (ir/passes/fusion.h: GELU,
  /// weight GEMMs with their bias, idle Dropouts) before layers are formed.
  bool fuse = true;
  /// The graph will only run forward (pipetrain run, the forward benchmark):
  /// with `fuse`, also the fusions a backward pass would not take
  /// (fold_conv_batchnorm, fuse_conv_add, fuse_conv_relu).
  bool inference = false;
};

/// Reads a model file (with external data files next to it). Throws
/// ModelError (file, node, shape named) or UnsupportedOp (every unsupported
/// op with its node names, all at once).
ir::Graph import_model(const std::string& path, const ImportOptions& options = {});

/// Same from serialized bytes; external data is looked up in `base_dir`.
ir::Graph import_model_bytes(const std::string& bytes, const std::string& base_dir,
                             const ImportOptions& options = {});

/// Same from a model built in memory (the zoo's), which the import changes: no
/// serialized copy of its weights on the way (a full-size VGG-16 holds 553 MB).
/// `origin` names it in messages.
ir::Graph import_model_proto(onnx::ModelProto& model, const std::string& origin,
                             const ImportOptions& options = {});

/// Writes the graph as an ONNX model (opset graph.opset); values become
/// initializers. Writes to a temporary file and renames, so a failure never
/// leaves a half-written file.
void export_model(const ir::Graph& graph, const std::string& path);

/// Writes `original` again with the values of `trained`'s params and buffers
/// (same names) in place of its initializers; nothing else changes. Atomic.
void save_trained_weights(const std::string& original, const ir::Graph& trained,
                          const std::string& path);

/// Reads a serialized TensorProto (the ONNX test data format).
ir::Tensor load_tensor_proto(const std::string& path);
/// Same, also giving the TensorProto's name (ONNX test data names each input
/// after the graph input it feeds); `name` may be null.
ir::Tensor load_tensor_proto(const std::string& path, std::string* name);

}  // namespace pipetrain::importer
