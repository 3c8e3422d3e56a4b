// The vocabulary gradient rules are written in (after ONNX Runtime's gradient
// builder): I(i) / O(i) name the forward node's inputs and outputs, GO(i) the
// gradient flowing into output i ("" when none does), wants(i) says whether
// input i needs a gradient, and set_GI(i, t) contributes t to it. emit()
// appends backward nodes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace pipetrain::autodiff {

class GradBuilder {
 public:
  GradBuilder(ir::Graph& g, size_t node_index, std::vector<std::string> output_grads,
              std::vector<bool> wants);

  /// The forward node. emit() appends to the node list: do not hold this
  /// reference (or anything inside it) across an emit().
  const ir::Node& node() const { return g_.nodes[node_index_]; }
  std::string I(size_t i) const { return node().inputs[i]; }
  std::string O(size_t i) const { return node().outputs[i]; }
  bool has_I(size_t i) const { return node().has_input(i); }
  const std::string& GO(size_t i) const { return output_grads_[i]; }
  bool has_GO(size_t i) const { return i < output_grads_.size() && !output_grads_[i].empty(); }
  bool wants(size_t i) const { return i < wants_.size() && wants_[i]; }
  void set_GI(size_t i, const std::string& grad);
  const std::map<size_t, std::string>& input_grads() const { return input_grads_; }

  const ir::Shape& shape(const std::string& t) const { return g_.tensor(t).shape; }
  ir::DType dtype(const std::string& t) const { return g_.tensor(t).dtype; }
  /// The constant value of t, or nullptr.
  const ir::Tensor* value(const std::string& t) const { return g_.value(t); }

  /// Appends a backward node; outputs listed in `skip` stay absent (""). Returns
  /// the output names (shapes inferred by the op's schema).
  std::vector<std::string> emit(const std::string& op, std::vector<std::string> inputs,
                                size_t num_outputs, std::map<std::string, ir::Attribute> attrs = {},
                                std::vector<bool> skip = {});
  std::string emit1(const std::string& op, std::vector<std::string> inputs,
                    std::map<std::string, ir::Attribute> attrs = {});
  /// Scalar f32 constant (shared per value).
  std::string scalar(float v);
  /// i64 constant of shape (v.size()).
  std::string ints(const std::vector<int64_t>& v);
  /// Sums `grad` over the axes broadcasting added or stretched so it gets `target`'s shape.
  std::string reduce_to(const std::string& grad, const ir::Shape& target);
  /// Reshape t to `shape` (a no-op when equal).
  std::string reshape(const std::string& t, const ir::Shape& shape);
  /// Adds forward output k to the node when it is absent (Dropout's mask) and returns its name.
  std::string ensure_output(size_t k, const std::string& name_hint);

  /// Throws UnsupportedOp "<node>: no gradient for <what>".
  [[noreturn]] void unsupported(const std::string& what) const;

 private:
  ir::Graph& g_;
  size_t node_index_;
  std::vector<std::string> output_grads_;
  std::vector<bool> wants_;
  std::map<size_t, std::string> input_grads_;
};

using GradRule = void (*)(GradBuilder&);

/// The registry: one rule per differentiable op; kNoGradient for ops gradients
/// never flow through (explicit, so a missing rule is a bug the tests catch).
struct RuleEntry {
  GradRule rule = nullptr;  // nullptr = no gradient
};
const std::map<std::string, RuleEntry>& rule_registry();

// One registration function per rules file (autodiff/rules/<family>.cc).
void register_elementwise_rules(std::map<std::string, RuleEntry>& r);
void register_activation_rules(std::map<std::string, RuleEntry>& r);
void register_linalg_rules(std::map<std::string, RuleEntry>& r);
void register_conv_pool_rules(std::map<std::string, RuleEntry>& r);
void register_norm_loss_rules(std::map<std::string, RuleEntry>& r);
void register_shape_rules(std::map<std::string, RuleEntry>& r);
void register_index_rules(std::map<std::string, RuleEntry>& r);
void register_rnn_rules(std::map<std::string, RuleEntry>& r);

}  // namespace pipetrain::autodiff
