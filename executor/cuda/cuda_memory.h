// A CUDA device's memory as residency sees it (executor/device/residency.h),
// with the worker's two streams: kernels run on the compute stream, copies
// on the copy stream. An upload first waits for the compute work queued so
// far (its block may be one an earlier kernel still reads, back in the
// cache), and the compute stream waits for each upload before its next
// kernel. Downloads wait for the compute stream and finish before
// returning. nvcc only.
#pragma once

#include <cuda_runtime.h>

#include "executor/cuda/caching_allocator.h"
#include "executor/cuda/cuda_check.h"
#include "executor/device/residency.h"

namespace pipetrain::exec::cuda {

class CudaMemory final : public device::DeviceMemory {
 public:
  /// Streams and events on `device` (made current).
  CudaMemory(int device, CachingAllocator& allocator) : allocator_(allocator) {
    PIPETRAIN_CUDA_CHECK(cudaSetDevice(device));
    PIPETRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    PIPETRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    PIPETRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&compute_mark_, cudaEventDisableTiming));
    PIPETRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&copies_done_, cudaEventDisableTiming));
  }
  ~CudaMemory() override {
    cudaStreamSynchronize(compute_);
    cudaStreamSynchronize(copy_);
    cudaEventDestroy(compute_mark_);
    cudaEventDestroy(copies_done_);
    cudaStreamDestroy(compute_);
    cudaStreamDestroy(copy_);
  }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  cudaStream_t compute() const { return compute_; }

  void* allocate(size_t bytes) override { return allocator_.allocate(bytes); }
  void release(void* p, size_t bytes) override { allocator_.release(p, bytes); }

  void upload(void* dst, const void* src, size_t bytes) override {
    copy_after_compute();
    PIPETRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, copy_));
    // Whatever the compute stream runs next may read it.
    PIPETRAIN_CUDA_CHECK(cudaEventRecord(copies_done_, copy_));
    PIPETRAIN_CUDA_CHECK(cudaStreamWaitEvent(compute_, copies_done_, 0));
  }

  void download(void* dst, const void* src, size_t bytes) override {
    copy_after_compute();
    PIPETRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, copy_));
    const cudaError_t err = cudaStreamSynchronize(copy_);
    if (err != cudaSuccess)
      throw RuntimeFault(std::string("a CUDA kernel or copy failed: ") + cudaGetErrorString(err));
  }

  void zero(void* p, size_t bytes) override {
    PIPETRAIN_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, compute_));
  }
  size_t device_allocations() const override { return allocator_.device_allocations(); }

 private:
  void copy_after_compute() {
    PIPETRAIN_CUDA_CHECK(cudaEventRecord(compute_mark_, compute_));
    PIPETRAIN_CUDA_CHECK(cudaStreamWaitEvent(copy_, compute_mark_, 0));
  }

  CachingAllocator& allocator_;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cudaEvent_t compute_mark_ = nullptr, copies_done_ = nullptr;
};

}  // namespace pipetrain::exec::cuda
