// The helper every import-time expansion (op_expansions.h) builds its
// replacement nodes with.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"

namespace pipetrain::importer {

/// Builds the replacement of one node: fresh names for new nodes, tensors
/// and constants; ops given an output name write the original node's outputs.
class ExpansionBuilder {
 public:
  ExpansionBuilder(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken)
      : g_(g), n_(n), taken_(taken) {}

  std::string fresh(const std::string& base) {
    std::string name = n_.name + "/" + base;
    for (int k = 1; g_.has_tensor(name) || taken_.count(name); ++k)
      name = n_.name + "/" + base + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
  }
  std::string ints(const std::vector<int64_t>& v) {
    return constant(ir::Tensor::from_i64(v, {static_cast<int64_t>(v.size())}));
  }
  std::string scalar(float v) { return constant(ir::Tensor::scalar_f32(v)); }
  std::string constant(ir::Tensor value) {
    const std::string name = fresh("const");
    g_.set_value(name, std::move(value), ir::Role::kConstant);
    return name;
  }
  /// Appends op(inputs) and returns its output (`out`, or a fresh name).
  std::string op(const std::string& type, std::vector<std::string> inputs,
                 std::map<std::string, ir::Attribute> attrs = {}, std::string out = "") {
    if (out.empty()) out = fresh(type + "_out");
    nodes.push_back({fresh(type), type, std::move(inputs), {out}, std::move(attrs)});
    return out;
  }
  /// x[starts:ends] along `axes`, then reshaped to `shape`.
  std::string slice(const std::string& x, const std::vector<int64_t>& starts,
                    const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                    const std::vector<int64_t>& shape) {
    return op("Reshape", {op("Slice", {x, ints(starts), ints(ends), ints(axes)}), ints(shape)});
  }
  /// The parts joined along `axis` (one part passes through), written to `out`.
  std::string concat(const std::vector<std::string>& parts, int64_t axis, std::string out = "") {
    if (parts.size() == 1) return op("Identity", {parts[0]}, {}, std::move(out));
    return op("Concat", parts, {{"axis", ir::Attribute(axis)}}, std::move(out));
  }
  const ir::Shape& shape(size_t i) const {
    if (!n_.has_input(i) || !g_.has_tensor(n_.inputs[i]))
      throw ModelError(n_.describe() + ": input " + std::to_string(i) + " is missing");
    return g_.tensor(n_.inputs[i]).shape;
  }
  /// The value of input i, which must be a constant: it decides the output
  /// shape, and pipetrain's shapes are static.
  const ir::Tensor& constant_input(size_t i, const char* what) const {
    shape(i);  // present
    const ir::Tensor* v = g_.value(n_.inputs[i]);
    if (!v)
      fail(std::string(what) + " '" + n_.inputs[i] +
           "' is not a constant: it decides the output shape (static shapes only)");
    return *v;
  }
  const ir::Graph& graph() const { return g_; }
  [[noreturn]] void fail(const std::string& msg) const {
    throw ModelError(n_.describe() + ": " + msg);
  }

  std::vector<ir::Node> nodes;

 private:
  ir::Graph& g_;
  const ir::Node& n_;
  std::set<std::string>& taken_;
};

}  // namespace pipetrain::importer
