// A small writer of ONNX graphs for the zoo: PyTorch-like node names from a
// module scope stack, parameters initialised from one seeded generator, and
// constants as Constant nodes (as torch.onnx.export writes them), so that the
// importer sees float constants as constants and every float initializer as a
// trainable parameter. Internal to models/.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace pipetrain::models {

/// How a parameter is filled (the math of PyTorch's and HF's initialisers).
struct Init {
  enum class Kind { kUniform, kNormal, kConstant };
  Kind kind = Kind::kConstant;
  float a = 0.0f;  // uniform: bound (U(-a, a)); normal: standard deviation; constant: value

  static Init uniform(float bound) { return {Kind::kUniform, bound}; }
  static Init normal(float stddev) { return {Kind::kNormal, stddev}; }
  static Init constant(float value) { return {Kind::kConstant, value}; }
};

/// One attribute of a node.
onnx::AttributeProto attr_int(const std::string& name, int64_t v);
onnx::AttributeProto attr_ints(const std::string& name, const std::vector<int64_t>& v);
onnx::AttributeProto attr_float(const std::string& name, float v);
onnx::AttributeProto attr_string(const std::string& name, const std::string& v);

/// What initializers hold.
enum class Values {
  kDrawn,  // every parameter filled by its Init
  kZeros,  // randomly initialised parameters are zeros (constant ones keep their value)
  kNone,   // no data at all: for counting only, not a valid model
};

class OnnxBuilder {
 public:
  OnnxBuilder(const std::string& graph_name, uint64_t seed, Values values);

  /// Enters a module scope for as long as the guard lives. `local` is the
  /// attribute name ("conv1") or a container index ("0"); an index is shown
  /// as "<parent>.<index>" in node names, as PyTorch does
  /// ("/layer1/layer1.0/conv1/Conv"), and parameters are named by the dotted
  /// path ("layer1.0.conv1.weight"). A ModuleList item, which has no scope
  /// of its own container in PyTorch's names, is entered as "layer.3".
  class [[nodiscard]] Scope {
   public:
    Scope(OnnxBuilder* b, const std::string& local) : b_(b) { b_->push_scope(local); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() { b_->scopes_.pop_back(); }

   private:
    OnnxBuilder* b_;
  };
  Scope scope(const std::string& local) { return Scope(this, local); }

  /// A graph input; dims of 0 are the symbolic batch dimension "N".
  std::string input(const std::string& name, int32_t elem_type, const std::vector<int64_t>& dims) {
    return add_value_info(graph_.add_input(), name, elem_type, dims);
  }
  /// Declares `tensor` a graph output; dims of 0 are "N" as for inputs.
  void output(const std::string& tensor, int32_t elem_type, const std::vector<int64_t>& dims);

  /// A trainable parameter "<scope path>.<local>" (f32 initializer).
  std::string param(const std::string& local, const std::vector<int64_t>& shape, Init init);

  /// A non-trainable float initializer (BatchNormalization's running
  /// statistics: the importer makes those buffers); not counted as a param.
  std::string buffer(const std::string& local, const std::vector<int64_t>& shape, Init init);

  /// Constant nodes (named after the scope like any node).
  std::string constant_i64(const std::vector<int64_t>& values, const std::vector<int64_t>& shape);
  std::string constant_i64(const std::vector<int64_t>& values) {
    return constant_i64(values, {static_cast<int64_t>(values.size())});
  }
  std::string scalar_i64(int64_t v) { return constant_i64({v}, {}); }
  std::string constant_f32(const std::vector<float>& values, const std::vector<int64_t>& shape);
  std::string scalar_f32(float v) { return constant_f32({v}, {}); }

  /// Adds a node "/<scopes>/<op_type>[_k]" and returns its outputs. An empty
  /// `out_name` names output k "<node>_output_<k>".
  std::vector<std::string> ops(const std::string& op_type, const std::vector<std::string>& inputs,
                               int num_outputs, const std::vector<onnx::AttributeProto>& attrs = {},
                               const std::string& out_name = "");
  /// Same, the first output only.
  std::string op(const std::string& op_type, const std::vector<std::string>& inputs,
                 const std::vector<onnx::AttributeProto>& attrs = {},
                 const std::string& out_name = "") {
    return ops(op_type, inputs, 1, attrs, out_name)[0];
  }

  /// Trainable elements added so far.
  int64_t param_count() const { return param_count_; }

  /// The model (ir_version 8, default-domain opset 17). Moves the graph out.
  onnx::ModelProto finish();

 private:
  struct ScopeEntry {
    std::string local;   // attribute name or index
    std::string shown;   // component of node names
    std::string dotted;  // parameter prefix
  };
  static std::string add_value_info(onnx::ValueInfoProto* vi, const std::string& name,
                                    int32_t elem_type, const std::vector<int64_t>& dims);
  void push_scope(const std::string& local);
  std::string node_name(const std::string& op_type);
  std::string initializer(const std::string& local, const std::vector<int64_t>& shape, Init init);
  void fill(float* dst, int64_t n, Init init);

  onnx::GraphProto graph_;
  std::vector<ScopeEntry> scopes_;
  std::map<std::string, int> name_uses_;
  std::mt19937_64 rng_;
  Values values_;
  int64_t param_count_ = 0;
};

}  // namespace pipetrain::models
