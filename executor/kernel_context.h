// What a kernel sees of one node execution: the node (for attributes),
// its input values and its preallocated outputs (shapes from the IR).
#pragma once

#include <cassert>
#include <cstdint>
#include <vector>

#include "ir/node.h"
#include "ir/tensor.h"

namespace pipetrain::exec {

struct KernelContext {
  const ir::Node* node = nullptr;
  std::vector<const ir::Tensor*> inputs;  // nullptr for an absent optional input
  std::vector<ir::Tensor*> outputs;       // nullptr for an absent optional output
  uint64_t seed = 0;                      // per-node, per-step seed for random ops (Dropout)
  bool training = false;  // run-level training flag (Dropout without training_mode input)
  /// inputs[i] is a graph value (parameter, buffer, constant): the same buffer
  /// on every run, so a kernel may cache a derived form of it (a reordered
  /// weight) keyed by its address and `values_version`.
  std::vector<bool> input_is_value;
  /// Bumped by whoever changes values in place (an optimizer step); caches
  /// keyed on an older version are stale.
  uint64_t values_version = 0;
  /// accumulate[k]: outputs[k] holds a running sum (a gradient accumulator)
  /// that the kernel adds its result to (GEMM beta = 1) instead of
  /// overwriting; only for outputs the backend's kernel_accumulates() names.
  std::vector<bool> accumulate;
  /// Bit i: input i (or output i) is a 4-D (N, C, H, W) tensor stored in
  /// the backend's blocked activation layout instead of row-major; only
  /// where the backend's layout_access() allows it (executor/layout_plan.h).
  uint32_t blocked_inputs = 0, blocked_outputs = 0;

  const ir::Node& n() const { return *node; }
  bool in_is_value(size_t i) const { return i < input_is_value.size() && input_is_value[i]; }
  bool has_in(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  bool has_out(size_t i) const { return i < outputs.size() && outputs[i] != nullptr; }
  bool accumulates(size_t k) const { return k < accumulate.size() && accumulate[k]; }
  bool in_blocked(size_t i) const { return i < 32 && ((blocked_inputs >> i) & 1u); }
  bool out_blocked(size_t k) const { return k < 32 && ((blocked_outputs >> k) & 1u); }
  const ir::Tensor& in(size_t i) const {
    assert(has_in(i));
    return *inputs[i];
  }
  ir::Tensor& out(size_t i) const {
    assert(has_out(i));
    return *outputs[i];
  }
};

}  // namespace pipetrain::exec
