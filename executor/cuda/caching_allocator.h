// Device memory for one CUDA device, cached (device::BlockCache, which the
// portable backend's tests also run): the per-op buffers of a training step
// stop calling cudaMalloc/cudaFree (which synchronise the device) after the
// first step. Not thread-safe: one per backend (worker).
#pragma once

#include "executor/device/block_cache.h"

namespace pipetrain::exec::cuda {

class CachingAllocator : public device::BlockCache {
 public:
  CachingAllocator();
};

}  // namespace pipetrain::exec::cuda
