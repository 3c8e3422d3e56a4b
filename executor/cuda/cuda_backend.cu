// CUDA backend plumbing: device discovery and the backend object. The op
// kernels (cuBLAS, cuDNN and our own) arrive with the CUDA backend issue;
// until then every node reports itself unsupported, so nothing runs wrongly.
#include <cuda_runtime.h>

#include <string>

#include "executor/backend.h"
#include "ir/error.h"

#define PIPETRAIN_CUDA_CHECK(call)                                             \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess)                                                   \
      throw ::pipetrain::RuntimeFault(std::string(#call) +                     \
                                      " failed: " + cudaGetErrorString(err_)); \
  } while (0)

namespace pipetrain::exec {

namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    PIPETRAIN_CUDA_CHECK(cudaSetDevice(device_));
    PIPETRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    PIPETRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
  }
  ~CudaBackend() override {
    cudaStreamDestroy(compute_);
    cudaStreamDestroy(copy_);
  }
  std::string name() const override { return "cuda:" + std::to_string(device_); }
  std::string unsupported_reason(const ir::Graph&, const ir::Node& n) const override {
    return "the CUDA kernel for " + n.op_type + " is not implemented yet";
  }
  void run(KernelContext& ctx) override {
    throw UnsupportedOp(ctx.n().describe() + ": the CUDA backend has no kernels yet");
  }

 private:
  int device_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  int n = cuda_device_count();
  if (n == 0) throw RuntimeFault("no CUDA device is present");
  if (device < 0 || device >= n)
    throw RuntimeFault("CUDA device " + std::to_string(device) + " does not exist (" +
                       std::to_string(n) + " present)");
  return std::make_unique<CudaBackend>(device);
}

}  // namespace pipetrain::exec
