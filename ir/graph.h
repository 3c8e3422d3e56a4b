// The IR graph: tensors with static descriptors, nodes, constant values
// (parameters, buffers, constants), graph inputs/outputs and layers.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/node.h"
#include "ir/tensor.h"

namespace pipetrain::ir {

/// What a tensor is for; decides stashing, checkpointing and placement later.
enum class Role {
  kInput,           // fed by the user each step (data, labels)
  kParam,           // trainable weight (float initializer)
  kBuffer,          // non-trainable state carried across steps (BatchNorm running stats)
  kConstant,        // fixed value (integer initializers, folded shape subgraphs)
  kActivation,      // produced by a node
  kGrad,            // gradient of another tensor
  kOptimizerState,  // momentum, Adam moments
};
const char* role_name(Role r);

struct TensorDesc {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  Role role = Role::kActivation;
  size_t nbytes() const { return static_cast<size_t>(numel(shape)) * dtype_size(dtype); }
};

/// The partitioning unit: an ordered group of nodes (indices into Graph::nodes).
struct Layer {
  std::string name;
  std::vector<size_t> nodes;
};

class Graph {
 public:
  std::string name;
  int64_t opset = 17;  // default-domain opset the node semantics follow
  /// The model file's own opset, older than `opset` when the importer converted it
  /// (for the few semantics libonnx's converter leaves alone: PRelu before 7).
  int64_t source_opset = 17;
  std::vector<Node> nodes;
  std::vector<std::string> inputs;   // user-fed tensors, in order
  std::vector<std::string> outputs;  // graph results, in order
  std::vector<Layer> layers;

  // --- tensors -----------------------------------------------------------
  /// Adds or replaces a descriptor.
  TensorDesc& set_tensor(TensorDesc desc);
  bool has_tensor(const std::string& name) const { return tensors_.count(name) != 0; }
  /// Throws ModelError if unknown.
  const TensorDesc& tensor(const std::string& name) const;
  TensorDesc& tensor(const std::string& name);
  const std::map<std::string, TensorDesc>& tensors() const { return tensors_; }
  void erase_tensor(const std::string& name);

  // --- values: params, buffers, constants --------------------------------
  /// Stores a value and its descriptor (dtype and shape taken from the value).
  void set_value(const std::string& name, Tensor value, Role role);
  bool has_value(const std::string& name) const { return values_.count(name) != 0; }
  const Tensor* value(const std::string& name) const;
  /// For in-place updates of a stored value (optimizer steps); nullptr if absent.
  Tensor* mutable_value(const std::string& name);
  const std::map<std::string, Tensor>& values() const { return values_; }
  /// Names of tensors with role kParam, sorted.
  std::vector<std::string> params() const;

  // --- structure -----------------------------------------------------------
  /// Node index producing each tensor (absent for inputs and values).
  std::map<std::string, size_t> producers() const;
  /// Node indices consuming each tensor.
  std::map<std::string, std::vector<size_t>> consumers() const;
  /// Node indices in a topological order (stable: keeps file order where possible).
  /// Throws ModelError naming a node on a cycle or an undefined input.
  std::vector<size_t> topo_order() const;
  /// Reorders `nodes` topologically (and remaps layers).
  void sort_topologically();
  /// Runs every node's shape rule in order, filling output descriptors.
  void infer_shapes();
  /// Checks the invariants: unique names, defined inputs, known ops with valid
  /// arity and attributes, descriptors consistent with the shape rules,
  /// outputs produced, layers covering every node once. Throws ModelError.
  void verify() const;
  /// Groups nodes into layers; node.layer is set for every node.
  void set_layers(std::vector<Layer> layers);

  /// Counts of trainable parameter elements.
  int64_t param_count() const;

 private:
  std::map<std::string, TensorDesc> tensors_;
  std::map<std::string, Tensor> values_;
};

/// Text dump: inputs, values, nodes with shapes, layers, outputs.
std::string dump(const Graph& g);

}  // namespace pipetrain::ir
