// Node attributes: the subset of ONNX attribute kinds pipetrain's ops use.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ir/tensor.h"

namespace pipetrain::ir {

enum class AttrType { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor };

using Attribute = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>, Tensor>;

AttrType attr_type(const Attribute& a);
const char* attr_type_name(AttrType t);
/// Human-readable value for dumps ("[1, 2]", "0.5", "'NOTSET'", "tensor f32 (3)").
std::string attr_str(const Attribute& a);

}  // namespace pipetrain::ir
