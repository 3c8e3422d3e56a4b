// Element types pipetrain's IR knows. Values match ONNX TensorProto.DataType
// so conversion at the importer boundary is a checked cast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pipetrain::ir {

enum class DType : int {
  kUndefined = 0,
  kF32 = 1,
  kI32 = 6,
  kI64 = 7,
  kBool = 9,
  kF16 = 10,
  kBF16 = 16,
};

/// Bytes per element; 0 for kUndefined.
size_t dtype_size(DType t);
/// Short name used in dumps and error messages: f32, i64, ...
const char* dtype_name(DType t);
/// Parses a short name; throws ModelError on an unknown one.
DType dtype_from_name(const std::string& name);
bool is_float(DType t);
/// Maps an ONNX TensorProto.DataType value; returns kUndefined if not supported.
DType dtype_from_onnx(int onnx_type);

/// IEEE half and bfloat16 conversions (round to nearest even).
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float f);

}  // namespace pipetrain::ir
