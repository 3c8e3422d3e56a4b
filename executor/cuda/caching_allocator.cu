#include "executor/cuda/caching_allocator.h"

#include "executor/cuda/cuda_check.h"

namespace pipetrain::exec::cuda {

// Small blocks round to 512 bytes, large ones to 2 MiB: few classes, little waste.
size_t CachingAllocator::size_class(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t(2) << 20, kLimit = size_t(1) << 20;
  if (bytes == 0) bytes = 1;
  const size_t unit = bytes < kLimit ? kSmall : kLarge;
  return (bytes + unit - 1) / unit * unit;
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t c = size_class(bytes);
  auto it = free_.find(c);
  if (it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= c;
    live_ += c;
    return p;
  }
  void* p = nullptr;
  if (cudaMalloc(&p, c) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky out-of-memory error
    empty_cache();
    PIPETRAIN_CUDA_CHECK(cudaMalloc(&p, c));
  }
  live_ += c;
  if (live_ + cached_ > peak_) peak_ = live_ + cached_;
  return p;
}

void CachingAllocator::release(void* p, size_t bytes) {
  if (!p) return;
  const size_t c = size_class(bytes);
  free_[c].push_back(p);
  live_ -= c;
  cached_ += c;
}

void CachingAllocator::empty_cache() {
  for (auto& [c, blocks] : free_)
    for (void* p : blocks) cudaFree(p);
  free_.clear();
  cached_ = 0;
}

CachingAllocator::~CachingAllocator() {
  empty_cache();
}

}  // namespace pipetrain::exec::cuda
