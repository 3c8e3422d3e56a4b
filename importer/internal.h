// Internal interfaces between the importer's files (not installed, not used
// outside importer/). Each function lives in the file named in its comment.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "importer/importer.h"
#include "importer/op_expansions.h"
#include "ir/graph.h"

namespace pipetrain::importer::detail {

/// Largest tensor we accept from a file (16 GiB): anything bigger is a
/// corrupt dimension, not a model we could train.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 34;

// --- tensor_proto.cc -----------------------------------------------------

/// Lower-case ONNX name of a TensorProto.DataType value ("double", "uint8").
std::string onnx_dtype_name(int32_t onnx_type);
/// Maps an ONNX element type; UnsupportedOp naming `what` and the dtype
/// otherwise. float64 maps to f32: a float64 model is computed (and trained)
/// in float32 and its weights are written back as float64.
ir::DType checked_dtype(int32_t onnx_type, const std::string& what);
/// The IR dtype of an ONNX element type as checked_dtype maps it, or kUndefined.
ir::DType imported_dtype(int32_t onnx_type);
/// Bytes per element of a narrow integer type the IR widens (int8, int16,
/// uint8-uint64: computed in i32, or i64 for uint32 and uint64); 0 otherwise.
int narrow_int_bytes(int32_t onnx_type);
bool is_unsigned_int(int32_t onnx_type);
/// Validates dims (non-negative, total size <= kMaxTensorBytes); ModelError naming `what`.
ir::Shape checked_shape(const std::vector<int64_t>& dims, ir::DType dtype, const std::string& what);
/// Decodes a TensorProto (raw_data, typed fields or external data relative
/// to `base_dir`). `what` names the tensor in messages ("initializer 'w'").
ir::Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir,
                             const std::string& what);
/// The resolved path of an external tensor's data file; ModelError when the
/// location is missing, absolute, or leads outside `base_dir`.
std::string external_file(const onnx::TensorProto& proto, const std::string& base_dir,
                          const std::string& what);
/// Encodes a tensor as raw_data; with `onnx_type` DOUBLE, FLOAT16 or
/// BFLOAT16, an f32 tensor goes back to that dtype of the file.
void tensor_to_proto(const ir::Tensor& t, const std::string& name, onnx::TensorProto* proto,
                     int32_t onnx_type = 0);
/// Replaces a tensor's external data by the same bytes as raw_data (dtype kept).
void inline_external_data(onnx::TensorProto* proto, const std::string& base_dir,
                          const std::string& what);
/// Reads a whole file; ModelError "<path>: cannot read file" when it cannot.
std::string read_file(const std::string& path);

// --- narrow_ints.cc ------------------------------------------------------

/// Attribute prefix (+ input index) with which the reader records the file's
/// element type of a narrow integer input of the ops narrow_int_expansions
/// expands: the IR's i32 no longer tells uint8 from int8.
inline constexpr const char* kFileDtypeAttr = "pipetrain.file_dtype_";
/// Cast, EyeLike, ... to a narrow integer type: to its wide IR type, and for
/// Cast a wrap into the narrow range after it.
std::optional<std::vector<ir::Node>> rewrite_narrow_dtype_attr(ir::Graph& g, const ir::Node& n,
                                                               std::set<std::string>& taken);
/// MaxPool on int8 / uint8 (computed in i32): in float32, which holds them exactly.
std::optional<std::vector<ir::Node>> rewrite_integer_max_pool(ir::Graph& g, const ir::Node& n,
                                                              std::set<std::string>& taken);
/// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
/// ConvInteger, QLinearMatMul, QLinearConv and BitShift.
const std::map<std::string, Expansion>& narrow_int_expansions();

// --- optimizer_ops.cc ----------------------------------------------------

/// The optimizer ops of ai.onnx.preview.training: Adagrad, Momentum, Adam.
inline constexpr const char* kPreviewTrainingDomain = "ai.onnx.preview.training";
/// ... and Gradient (gradient_op.cc).
const std::map<std::string, Expansion>& optimizer_expansions();
/// A node's op name in the IR: the preview training domain's ops keep their domain.
std::string ir_op_type(const onnx::NodeProto& n);
std::vector<ir::Node> expand_gradient(ir::Graph& g, const ir::Node& n, std::set<std::string>& t);

// --- float_widening.cc ---------------------------------------------------

/// Every float16 / bfloat16 tensor, type and dtype attribute of the model
/// (bodies included) made float32, before import (ImportOptions::half_as_float32).
void widen_half_floats(onnx::ModelProto* model, const std::string& base_dir);

// --- onnx_reader.cc ------------------------------------------------------

/// The default-domain opset of the model; ModelError when it has none.
int64_t default_opset(const onnx::ModelProto& model);
/// Unique node names: the model's own, "<OpType>_<index>" for unnamed nodes,
/// a numeric suffix for duplicates.
std::vector<std::string> node_names(const onnx::GraphProto& graph);
/// Throws one UnsupportedOp listing every node whose op (or domain) pipetrain
/// does not know, grouped by op type.
void check_ops_supported(const onnx::GraphProto& graph, const std::vector<std::string>& names);
/// Every name a node reads or the graph outputs is defined, and no tensor is
/// defined twice. Runs before libonnx sees the model: its converter crashes
/// on dangling names.
void check_structure(const onnx::GraphProto& graph, const std::vector<std::string>& names);
/// The IR form of a node: inputs, outputs, attributes (a control-flow body
/// as its serialized GraphProto, and what it reads from outside appended to
/// the inputs). `n->name` is set by the caller.
void fill_node(const onnx::NodeProto& np, const std::string& base_dir, ir::Node* n);
/// The value of a Constant node.
ir::Tensor constant_node_value(const onnx::NodeProto& n, const std::string& node_desc,
                               const std::string& base_dir);
/// A body graph serialized for an IR attribute, external tensors inlined.
std::string serialized_subgraph(const onnx::GraphProto& body, const std::string& base_dir,
                                const std::string& what);
/// The names a node's bodies (at any depth) read but do not define.
std::vector<std::string> outer_references(const onnx::NodeProto& n);
/// Builds the graph: inputs with bound shapes, initializers and Constant nodes
/// as values, nodes with their attributes. No shapes inferred yet.
ir::Graph graph_from_model(const onnx::ModelProto& model, int64_t opset,
                           const std::string& base_dir, const ImportOptions& options);

// --- opset_convert.cc ---------------------------------------------------

/// libonnx's strict shape inference and version converter from opset `from`
/// to `to`, isolated in a child process; ModelError when they fail or crash.
onnx::ModelProto convert_opset(const onnx::ModelProto& model, int64_t from, int64_t to);

// --- opset_rewrites.cc ---------------------------------------------------

/// Rewrites a node whose semantics at `g.opset` differ from what our schemas
/// implement (the latest opset). Input descriptors are known. Returns the
/// replacement nodes (in topological order) or nullopt when none is needed;
/// new constants are added to `g`, new names are taken from `taken_names`.
std::optional<std::vector<ir::Node>> rewrite_for_opset(ir::Graph& g, const ir::Node& n,
                                                       std::set<std::string>& taken_names);

// --- constant_folding.cc -------------------------------------------------

/// Evaluates `n` at import time when every input is a kConstant value (or
/// when only its input's static shape matters, as for Shape). Returns one
/// tensor per output, or nullopt when the node cannot or should not be folded.
/// Never throws for malformed nodes: the shape rule reports those.
std::optional<std::vector<ir::Tensor>> fold_node(const ir::Graph& g, const ir::Node& n);

// --- shape_pass.cc -------------------------------------------------------

/// Walks the nodes in topological order: applies opset rewrites, folds
/// constant nodes into values (when `fold`), runs the shape rule of the rest.
void infer_and_fold(ir::Graph& g, bool fold);
/// Removes values nothing reads (unused initializers, inputs of folded nodes).
void drop_unused_values(ir::Graph& g);

/// Rewires readers of Identity outputs to the Identity inputs and removes the
/// nodes (graph outputs keep theirs). Runs before layering (clears layers).
void elide_identities(ir::Graph& g);

// --- onnx_shape_check.cc -------------------------------------------------

/// Runs libonnx's shape inference on `model` (graph inputs bound to the
/// shapes in `g`) and throws ModelError naming the node where a fully static
/// libonnx shape disagrees with ours.
void check_against_onnx_shapes(onnx::ModelProto& model, const ir::Graph& g);

// --- layering.cc ---------------------------------------------------------

/// Groups nodes into layers by the first `depth` scopes of their names and
/// calls g.set_layers (may reorder nodes within a valid topological order).
void assign_layers(ir::Graph& g, int depth);

// --- exporter.cc ---------------------------------------------------------

/// The graph as a ModelProto (ir_version 8, opset g.opset).
onnx::ModelProto model_from_graph(const ir::Graph& g);

}  // namespace pipetrain::importer::detail
