#include "executor/device/block_cache.h"

#include <fmt/core.h>

#include "ir/error.h"

namespace pipetrain::exec::device {

size_t BlockCache::size_class(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t(2) << 20, kLimit = size_t(1) << 20;
  if (bytes == 0) bytes = 1;
  const size_t unit = bytes < kLimit ? kSmall : kLarge;
  return (bytes + unit - 1) / unit * unit;
}

void* BlockCache::allocate(size_t bytes) {
  const size_t c = size_class(bytes);
  if (auto it = free_.find(c); it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= c;
    live_ += c;
    return p;
  }
  void* p = raw_allocate_(c);
  if (!p) {
    empty_cache();
    p = raw_allocate_(c);
  }
  if (!p)
    throw RuntimeFault(fmt::format("out of device memory: {:.1f} MiB more with {:.1f} MiB in use",
                                   static_cast<double>(c) / 1048576.0,
                                   static_cast<double>(live_) / 1048576.0));
  ++device_allocations_;
  live_ += c;
  if (live_ + cached_ > peak_) peak_ = live_ + cached_;
  return p;
}

void BlockCache::release(void* p, size_t bytes) {
  if (!p) return;
  const size_t c = size_class(bytes);
  free_[c].push_back(p);
  live_ -= c;
  cached_ += c;
}

void BlockCache::empty_cache() {
  for (auto& [c, blocks] : free_)
    for (void* p : blocks) raw_free_(p);
  free_.clear();
  cached_ = 0;
}

}  // namespace pipetrain::exec::device
