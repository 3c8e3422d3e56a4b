// Op schemas: per op, its arity, the attributes it honours, its shape and
// dtype rule and whether gradients flow through it. Looked up by op type.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op_list.h"

namespace pipetrain::ir {

struct AttrSpec {
  std::string name;
  AttrType type;
};

class InferContext;

struct OpSchema {
  std::string op_type;
  int min_inputs = 1, max_inputs = 1;
  int min_outputs = 1, max_outputs = 1;
  /// Every attribute the op honours; any other attribute is refused (UnsupportedOp),
  /// so a model never runs with semantics we silently ignore.
  std::vector<AttrSpec> attrs;
  /// Shape and dtype rule; throws via ctx.fail() on invalid input.
  std::function<void(InferContext&)> infer;
  /// False for ops gradients never flow through (Shape, Equal, Not, ...).
  bool differentiable = true;
  /// Gradient ops that only autodiff emits: refused when a model file names them.
  bool internal = false;
};

/// What a shape rule sees of one node.
class InferContext {
 public:
  InferContext(const Graph& g, const Node& n) : graph_(g), node_(n) {}

  const Node& node() const { return node_; }
  size_t num_inputs() const { return node_.inputs.size(); }
  bool has_input(size_t i) const { return node_.has_input(i); }
  /// Descriptor of input i; fails if absent.
  const TensorDesc& input(size_t i) const;
  const Shape& shape(size_t i) const { return input(i).shape; }
  DType dtype(size_t i) const { return input(i).dtype; }
  /// The value of input i when it is a known constant (initializer or folded), else nullptr.
  const Tensor* constant(size_t i) const;
  /// Value of input i as int64 list; fails naming the input when it is not constant.
  std::vector<int64_t> constant_ints(size_t i) const;

  size_t num_outputs() const { return node_.outputs.size(); }
  void set_output(size_t i, DType dtype, Shape shape);
  const std::vector<std::pair<DType, Shape>>& outputs() const { return outputs_; }

  /// Throws ModelError "<Op> node '<name>': msg".
  [[noreturn]] void fail(const std::string& msg) const;
  /// Throws UnsupportedOp "<Op> node '<name>': msg".
  [[noreturn]] void unsupported(const std::string& msg) const;

 private:
  const Graph& graph_;
  const Node& node_;
  std::vector<std::pair<DType, Shape>> outputs_;
};

class OpRegistry {
 public:
  static const OpRegistry& instance();
  /// nullptr when the op is unknown.
  const OpSchema* find(const std::string& op_type) const;
  const std::map<std::string, OpSchema>& all() const { return schemas_; }

 private:
  OpRegistry();
  std::map<std::string, OpSchema> schemas_;
};

/// Runs the op's shape rule after checking arity and attributes. Throws
/// UnsupportedOp for unknown ops or attributes, ModelError for bad shapes.
std::vector<std::pair<DType, Shape>> infer_node(const Graph& g, const Node& n);

// One schema factory per op, defined in ir/ops/<family>.cc.
#define PIPETRAIN_DECLARE_SCHEMA(op) OpSchema schema_##op();
PIPETRAIN_OPS(PIPETRAIN_DECLARE_SCHEMA)
#undef PIPETRAIN_DECLARE_SCHEMA

}  // namespace pipetrain::ir
