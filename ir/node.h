// One operation in the IR: an op type, named tensor inputs/outputs, attributes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/attribute.h"

namespace pipetrain::ir {

struct Node {
  std::string name;                  // unique within the graph; used in every message
  std::string op_type;               // ONNX op type, e.g. "Conv"
  std::vector<std::string> inputs;   // "" marks an absent optional input
  std::vector<std::string> outputs;  // "" marks an absent optional output
  std::map<std::string, Attribute> attrs;
  int layer = -1;  // index into Graph::layers, -1 before layering
  /// Emitted by autodiff (a gradient computation); it belongs to the layer of
  /// the forward node whose gradient it computes.
  bool backward = false;

  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
  bool has_input(size_t i) const { return i < inputs.size() && !inputs[i].empty(); }
  bool has_output(size_t i) const { return i < outputs.size() && !outputs[i].empty(); }

  // Typed getters: the default is returned when the attribute is absent; a
  // present attribute of the wrong kind throws ModelError naming the node.
  int64_t attr_int(const std::string& key, int64_t dflt) const;
  float attr_float(const std::string& key, float dflt) const;
  std::string attr_string(const std::string& key, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& key, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attr_floats(const std::string& key, std::vector<float> dflt = {}) const;
  std::vector<std::string> attr_strings(const std::string& key,
                                        std::vector<std::string> dflt = {}) const;
  const Tensor& attr_tensor(const std::string& key) const;

  /// "Conv node '/layer1/conv1/Conv'": the prefix every message about this node uses.
  std::string describe() const;
};

}  // namespace pipetrain::ir
