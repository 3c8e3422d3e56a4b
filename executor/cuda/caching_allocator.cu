#include "executor/cuda/caching_allocator.h"

#include <cuda_runtime.h>

namespace pipetrain::exec::cuda {

CachingAllocator::CachingAllocator()
    : device::BlockCache(
          [](size_t bytes) -> void* {
            void* p = nullptr;
            if (cudaMalloc(&p, bytes) == cudaSuccess) return p;
            (void)cudaGetLastError();  // clear the sticky out-of-memory error
            return nullptr;
          },
          [](void* p) { cudaFree(p); }) {}

}  // namespace pipetrain::exec::cuda
