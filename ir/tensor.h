// A host tensor value: dtype, static shape and a 64-byte aligned buffer.
// Used for parameters, constants, inputs and the CPU backend's buffers.
// Copies share the buffer (cheap, like a handle); clone() copies the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ir/dtype.h"
#include "ir/shape.h"

namespace pipetrain::ir {

class Tensor {
 public:
  Tensor() = default;
  /// Allocates zero-filled storage for the shape.
  Tensor(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return dtype_ != DType::kUndefined; }

  void* raw() { return data_.get(); }
  const void* raw() const { return data_.get(); }
  template <typename T>
  T* data() {
    return static_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw());
  }

  /// A tensor over `bytes` bytes of `base` starting at `offset` (no copy, not
  /// zeroed): the planned arena's slots. Keeps `base` alive.
  static Tensor view(const std::shared_ptr<std::byte[]>& base, size_t offset, DType dtype,
                     Shape shape);
  /// Zero-filled 64-byte aligned storage of `bytes` bytes (an arena).
  static std::shared_ptr<std::byte[]> allocate(size_t bytes);
  /// Storage for the shape that is not written here: its bytes are undefined
  /// until someone writes them (a device tensor's host stand-in, whose large
  /// pages are never touched unless it comes back to the host).
  static Tensor uninitialized(DType dtype, Shape shape);
  /// The buffer's owner, for whoever must notice when the last handle goes.
  std::weak_ptr<std::byte[]> storage() const { return data_; }

  /// Deep copy.
  Tensor clone() const;
  /// Same bytes, new shape of equal element count (shares the buffer).
  Tensor reshaped(Shape shape) const;
  /// Element i as double (any dtype); for constant folding, tests and dumps.
  double at(int64_t i) const;
  /// Values as int64 (for i32/i64/bool/float shape tensors).
  std::vector<int64_t> to_i64() const;

  static Tensor scalar_f32(float v);
  static Tensor from_i64(const std::vector<int64_t>& v, Shape shape);
  static Tensor from_f32(const std::vector<float>& v, Shape shape);

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  // The product of shape_, kept with it: loops test `i < t.numel()` per element, and
  // a product over the shape each time cost half of an unoptimised build's data loading.
  int64_t numel_ = 1;
  std::shared_ptr<std::byte[]> data_;
};

}  // namespace pipetrain::ir
