#include "ir/node.h"

#include "ir/error.h"

namespace pipetrain::ir {

namespace {
template <typename T>
const T* get_attr(const Node& n, const std::string& key, AttrType want) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return nullptr;
  if (attr_type(it->second) != want)
    throw ModelError(n.describe() + ": attribute '" + key + "' is " +
                     attr_type_name(attr_type(it->second)) + ", expected " + attr_type_name(want));
  return &std::get<T>(it->second);
}
}  // namespace

int64_t Node::attr_int(const std::string& key, int64_t dflt) const {
  const auto* v = get_attr<int64_t>(*this, key, AttrType::kInt);
  return v ? *v : dflt;
}
float Node::attr_float(const std::string& key, float dflt) const {
  const auto* v = get_attr<float>(*this, key, AttrType::kFloat);
  return v ? *v : dflt;
}
std::string Node::attr_string(const std::string& key, const std::string& dflt) const {
  const auto* v = get_attr<std::string>(*this, key, AttrType::kString);
  return v ? *v : dflt;
}
std::vector<int64_t> Node::attr_ints(const std::string& key, std::vector<int64_t> dflt) const {
  const auto* v = get_attr<std::vector<int64_t>>(*this, key, AttrType::kInts);
  return v ? *v : dflt;
}
std::vector<float> Node::attr_floats(const std::string& key, std::vector<float> dflt) const {
  const auto* v = get_attr<std::vector<float>>(*this, key, AttrType::kFloats);
  return v ? *v : dflt;
}
std::vector<std::string> Node::attr_strings(const std::string& key,
                                            std::vector<std::string> dflt) const {
  const auto* v = get_attr<std::vector<std::string>>(*this, key, AttrType::kStrings);
  return v ? *v : dflt;
}
const Tensor& Node::attr_tensor(const std::string& key) const {
  const auto* v = get_attr<Tensor>(*this, key, AttrType::kTensor);
  if (!v) throw ModelError(describe() + ": missing required attribute '" + key + "'");
  return *v;
}

std::string Node::describe() const {
  return op_type + " node '" + name + "'";
}

}  // namespace pipetrain::ir
