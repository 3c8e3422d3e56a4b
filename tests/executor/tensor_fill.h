// Tensors of any dtype filled from an integer pattern, for the dtype-agnostic
// data-movement tests.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ir/tensor.h"

namespace pipetrain::test {

inline const ir::DType kAllDtypes[] = {ir::DType::kF32, ir::DType::kF16, ir::DType::kBF16,
                                       ir::DType::kI64, ir::DType::kI32, ir::DType::kBool};

/// Element i holds f(i) in the tensor's dtype (f16 mod 2048, bf16 mod 256 so
/// values stay exact; bool: f(i) odd).
inline ir::Tensor filled(
    ir::DType t, ir::Shape s,
    const std::function<int64_t(int64_t)>& f = [](int64_t i) { return i; }) {
  ir::Tensor x(t, std::move(s));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t v = f(i);
    switch (t) {
      case ir::DType::kF32: x.data<float>()[i] = static_cast<float>(v); break;
      case ir::DType::kF16:
        x.data<uint16_t>()[i] = ir::f32_to_f16(static_cast<float>(v % 2048));
        break;
      case ir::DType::kBF16:
        x.data<uint16_t>()[i] = ir::f32_to_bf16(static_cast<float>(v % 256));
        break;
      case ir::DType::kI64: x.data<int64_t>()[i] = v; break;
      case ir::DType::kI32: x.data<int32_t>()[i] = static_cast<int32_t>(v); break;
      case ir::DType::kBool: x.data<uint8_t>()[i] = static_cast<uint8_t>(v & 1); break;
      default: break;
    }
  }
  return x;
}

/// Element i holds i + offset.
inline ir::Tensor iota(ir::DType t, ir::Shape s, int64_t offset = 0) {
  return filled(t, std::move(s), [offset](int64_t i) { return i + offset; });
}

/// A 1-D i64 tensor.
inline ir::Tensor ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return ir::Tensor::from_i64(v, {n});
}

/// Every element as double.
inline std::vector<double> values(const ir::Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.at(i));
  return v;
}

/// x[i] = (i % 7) * 0.5 - 1.5 over shape s: small exact values of both signs.
inline ir::Tensor pattern(ir::Shape s) {
  ir::Tensor t(ir::DType::kF32, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>(i % 7) * 0.5f - 1.5f;
  return t;
}

}  // namespace pipetrain::test
