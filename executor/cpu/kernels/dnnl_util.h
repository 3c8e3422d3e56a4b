// oneDNN plumbing for the CPU kernels: one engine, a stream per thread and a
// process-wide cache of primitives keyed by a string of shapes and attributes
// (creating a primitive costs far more than running a small one).
#pragma once

#include <functional>
#include <memory>
#include <string>

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

/// Plain (row-major) f32 descriptor with explicit strides in elements.
dnnl::memory::desc plain_desc(const ir::Shape& dims, const ir::Shape& strides);
/// Plain row-major f32 descriptor.
dnnl::memory::desc plain_desc(const ir::Shape& dims);
/// "(2, 3)" pieces for cache keys.
std::string key_of(const ir::Shape& s);

}  // namespace pipetrain::exec::cpu::dnnl_util
