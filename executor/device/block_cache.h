// Device memory cached by size class: a freed block goes to a free list and is
// handed out again, so a training step's per-op buffers stop allocating after
// the first step (cudaMalloc and cudaFree synchronise the device). Host code
// shared by the CUDA backend (over cudaMalloc) and the portable backend (over
// host memory), so the CPU tests count the allocations the CUDA backend makes.
// Not thread-safe: one per backend (worker).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <vector>

namespace pipetrain::exec::device {

class BlockCache {
 public:
  /// `raw_allocate` returns nullptr when the device is out of memory;
  /// `raw_free` takes what it returned.
  BlockCache(std::function<void*(size_t)> raw_allocate, std::function<void(void*)> raw_free)
      : raw_allocate_(std::move(raw_allocate)), raw_free_(std::move(raw_free)) {}
  ~BlockCache() { empty_cache(); }
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  /// A block of at least `bytes` bytes: a cached one of its size class, or a
  /// new one. Out of memory, the cache is emptied and the allocation retried
  /// once; RuntimeFault naming the size after that.
  void* allocate(size_t bytes);
  /// Returns a block from allocate() (of that request size) to the cache.
  void release(void* p, size_t bytes);
  /// Frees every cached block.
  void empty_cache();

  /// Small requests round up to 512 bytes, from 1 MiB to 2 MiB: few classes, little waste.
  static size_t size_class(size_t bytes);
  /// Blocks taken from the device so far (allocations the cache could not serve).
  size_t device_allocations() const { return device_allocations_; }
  size_t cached_bytes() const { return cached_; }
  size_t peak_bytes() const { return peak_; }

 private:
  std::function<void*(size_t)> raw_allocate_;
  std::function<void(void*)> raw_free_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> blocks
  size_t cached_ = 0, live_ = 0, peak_ = 0, device_allocations_ = 0;
};

}  // namespace pipetrain::exec::device
