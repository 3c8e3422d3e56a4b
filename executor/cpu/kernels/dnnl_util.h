// oneDNN plumbing for the CPU kernels: one engine, a stream per thread and a
// process-wide cache of primitives keyed by a string of shapes and attributes
// (creating a primitive costs far more than running a small one).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "ir/shape.h"

namespace pipetrain::exec::cpu::dnnl_util {

dnnl::engine& engine();
/// The calling thread's stream on engine(); applies the thread count first.
dnnl::stream& stream();

/// Returns the cached object for `key`, building it with `make` on a miss.
/// Thread-safe; `make` may run twice for one key under a race (the first wins).
std::shared_ptr<void> cached(const std::string& key,
                             const std::function<std::shared_ptr<void>()>& make);

template <typename T>
std::shared_ptr<T> cached_as(const std::string& key,
                             const std::function<std::shared_ptr<T>()>& make) {
  return std::static_pointer_cast<T>(cached(key, [&] { return std::shared_ptr<void>(make()); }));
}

/// Weights in one primitive's layout, reordered once per (buffer, values_version)
/// when they are a graph value (KernelContext::values_version: the same bytes until
/// it changes); anything else is reordered on every call. A training step then
/// reorders each weight once per update and layout it is read in (the forward's,
/// the backward-data's), not once per microbatch.
class WeightCache {
 public:
  /// `data` (described by `user`) in the layout `inner` via `reorder`; the handle keeps
  /// its buffer alive even if another thread replaces the entry meanwhile.
  dnnl::memory get(const dnnl::reorder& reorder, const dnnl::memory::desc& user,
                   const dnnl::memory::desc& inner, const float* data, bool is_value,
                   uint64_t version);
  /// The same with `make` building the form of `data` (a bf16 copy, say).
  dnnl::memory get(const float* data, bool is_value, uint64_t version,
                   const std::function<dnnl::memory()>& make);

 private:
  // Bounds the entries (weights reallocated by their owner leave stale ones keyed
  // by dead addresses).
  static constexpr size_t kMaxEntries = 64;
  struct Entry {
    uint64_t version = 0;
    dnnl::memory w;
  };
  std::mutex mu_;
  std::unordered_map<const float*, Entry> entries_;  // guarded by mu_
};

/// Plain (row-major) f32 descriptor with explicit strides in elements.
dnnl::memory::desc plain_desc(const ir::Shape& dims, const ir::Shape& strides);
/// Plain row-major f32 descriptor.
dnnl::memory::desc plain_desc(const ir::Shape& dims);
/// A scratchpad of d's size in the calling thread's buffer, kept between
/// calls (a primitive's scratchpad, fresh each call, cost page faults on every
/// run); valid until the thread's next call.
dnnl::memory scratchpad(const dnnl::memory::desc& d);
/// d's dims in a layout the primitive chooses (format `any`), in f32 or bf16.
dnnl::memory::desc any_layout(const dnnl::memory::desc& d, bool bf16);
/// A matmul's attributes: our scratchpad (one primitive runs on many
/// threads), Y = alpha * product (+ sum * Y when `sum` is not 0).
dnnl::primitive_attr matmul_attr(float alpha, float sum);
/// "(2, 3)" pieces for cache keys.
std::string key_of(const ir::Shape& s);

/// The implementations oneDNN picks here for a ResNet-style 3x3 convolution
/// (8 x 64 x 28 x 28), its backward data and weights, and a 256 x 1024 x 1024
/// weight product: "conv brgconv:avx512_core, ..." (pipetrain doctor).
std::string representative_kernels();

}  // namespace pipetrain::exec::cpu::dnnl_util
