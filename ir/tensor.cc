#include "ir/tensor.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace pipetrain::ir {

namespace {
std::shared_ptr<std::byte[]> alloc_aligned(size_t bytes, bool zero = true) {
  size_t rounded = ((bytes + 63) / 64) * 64;
  if (rounded == 0) rounded = 64;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
  if (!p) throw std::bad_alloc();
  if (zero) std::memset(p, 0, rounded);
  return std::shared_ptr<std::byte[]>(p, [](std::byte* q) { std::free(q); });
}
}  // namespace

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(ir::numel(shape_)),
      data_(alloc_aligned(nbytes())) {}

Tensor Tensor::view(const std::shared_ptr<std::byte[]>& base, size_t offset, DType dtype,
                    Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = ir::numel(t.shape_);
  t.data_ = std::shared_ptr<std::byte[]>(base, base.get() + offset);
  return t;
}

std::shared_ptr<std::byte[]> Tensor::allocate(size_t bytes) {
  return alloc_aligned(bytes);
}

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = ir::numel(t.shape_);
  t.data_ = alloc_aligned(t.nbytes(), /*zero=*/false);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t;
  t.dtype_ = dtype_;
  t.shape_ = shape_;
  t.numel_ = numel_;
  t.data_ = alloc_aligned(nbytes(), /*zero=*/false);  // every byte is copied next
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.numel_ = ir::numel(t.shape_);
  return t;
}

double Tensor::at(int64_t i) const {
  switch (dtype_) {
    case DType::kF32: return data<float>()[i];
    case DType::kI32: return data<int32_t>()[i];
    case DType::kI64: return static_cast<double>(data<int64_t>()[i]);
    case DType::kBool: return data<uint8_t>()[i] ? 1.0 : 0.0;
    case DType::kF16: return f16_to_f32(data<uint16_t>()[i]);
    case DType::kBF16: return bf16_to_f32(data<uint16_t>()[i]);
    case DType::kUndefined: break;
  }
  return 0.0;
}

std::vector<int64_t> Tensor::to_i64() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) {
    v[static_cast<size_t>(i)] =
        dtype_ == DType::kI64 ? data<int64_t>()[i] : static_cast<int64_t>(at(i));
  }
  return v;
}

Tensor Tensor::scalar_f32(float v) {
  Tensor t(DType::kF32, {});
  *t.data<float>() = v;
  return t;
}

Tensor Tensor::from_i64(const std::vector<int64_t>& v, Shape shape) {
  Tensor t(DType::kI64, std::move(shape));
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * 8);
  return t;
}

Tensor Tensor::from_f32(const std::vector<float>& v, Shape shape) {
  Tensor t(DType::kF32, std::move(shape));
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * 4);
  return t;
}

}  // namespace pipetrain::ir
