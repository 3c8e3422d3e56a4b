#include "ir/attribute.h"

#include <sstream>

namespace pipetrain::ir {

AttrType attr_type(const Attribute& a) {
  return static_cast<AttrType>(a.index());
}

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kInt: return "int";
    case AttrType::kFloat: return "float";
    case AttrType::kString: return "string";
    case AttrType::kInts: return "ints";
    case AttrType::kFloats: return "floats";
    case AttrType::kStrings: return "strings";
    case AttrType::kTensor: return "tensor";
  }
  return "?";
}

std::string attr_str(const Attribute& a) {
  std::ostringstream os;
  auto list = [&os](const auto& v) {
    os << "[";
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
    os << "]";
  };
  switch (attr_type(a)) {
    case AttrType::kInt: os << std::get<int64_t>(a); break;
    case AttrType::kFloat: os << std::get<float>(a); break;
    case AttrType::kString: os << "'" << std::get<std::string>(a) << "'"; break;
    case AttrType::kInts: list(std::get<std::vector<int64_t>>(a)); break;
    case AttrType::kFloats: list(std::get<std::vector<float>>(a)); break;
    case AttrType::kStrings: list(std::get<std::vector<std::string>>(a)); break;
    case AttrType::kTensor: {
      const Tensor& t = std::get<Tensor>(a);
      os << "tensor " << dtype_name(t.dtype()) << " " << shape_str(t.shape());
      break;
    }
  }
  return os.str();
}

}  // namespace pipetrain::ir
