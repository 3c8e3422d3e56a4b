// Device memory for one CUDA device, cached: freed blocks go to a free list
// by size class and are handed out again, so the per-op buffers of a
// training step stop calling cudaMalloc/cudaFree (which synchronise the
// device) after the first step. Not thread-safe: one per backend (worker).
#pragma once

#include <cstddef>
#include <map>
#include <vector>

namespace pipetrain::exec::cuda {

class CachingAllocator {
 public:
  CachingAllocator() = default;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator();

  /// A block of at least `bytes` bytes (256-byte aligned); on out-of-memory
  /// the cache is emptied and the allocation retried once.
  void* allocate(size_t bytes);
  /// Returns a block from allocate() (of that request size) to the cache.
  void release(void* p, size_t bytes);
  /// Frees every cached block.
  void empty_cache();

  size_t cached_bytes() const { return cached_; }
  size_t peak_bytes() const { return peak_; }

 private:
  static size_t size_class(size_t bytes);
  std::map<size_t, std::vector<void*>> free_;  // size class -> blocks
  size_t cached_ = 0, live_ = 0, peak_ = 0;
};

}  // namespace pipetrain::exec::cuda
