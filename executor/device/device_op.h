// What a shared (host/device) op implementation sees: the node, views of its
// inputs and outputs in the executing device's memory, and the host tensors
// for the small inputs it reads on the host (shapes, axes, bounds). An Exec
// policy runs the per-element work: a plain loop on the host (the portable
// backend), a grid-stride kernel on a CUDA stream (the CUDA backend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "executor/kernel_context.h"
#include "ir/dtype.h"
#include "ir/shape.h"

namespace pipetrain::exec::device {

/// A tensor in the executing device's memory (data may be a device pointer).
struct DeviceTensor {
  void* ptr = nullptr;
  ir::DType dtype = ir::DType::kUndefined;
  ir::Shape shape;

  bool defined() const { return dtype != ir::DType::kUndefined; }
  int64_t numel() const { return ir::numel(shape); }
  template <typename T>
  T* data() const {
    return static_cast<T*>(ptr);
  }
};

struct DeviceOpArgs {
  const KernelContext* host = nullptr;  // node, attributes, host copies of the inputs
  std::vector<DeviceTensor> in, out;    // undefined for absent ones

  const ir::Node& n() const { return host->n(); }
  bool has_in(size_t i) const { return i < in.size() && in[i].defined(); }
  bool has_out(size_t i) const { return i < out.size() && out[i].defined(); }
};

}  // namespace pipetrain::exec::device
