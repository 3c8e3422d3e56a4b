// The CUDA backend. Each node runs the shared op implementations
// (executor/device) through CudaExec, cuBLAS for Gemm/MatMul, cuDNN for
// convolutions, softmax and pooling where it expresses them exactly; shape
// metadata ops (Shape, Constant, ...) run on the host. The executor hands
// kernels host tensors, so a node's inputs are staged to device buffers on
// the copy stream, the compute stream waits for them (an event), runs the
// op, and the copy stream brings the outputs back after a second event.
// Buffers come from a caching allocator. Staging every node is the simple,
// correct first step; device-resident tensors are the next one.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <set>
#include <string>

#include "executor/backend.h"
#include "executor/cuda/caching_allocator.h"
#include "executor/cuda/cuda_blas.h"
#include "executor/cuda/cuda_exec.h"
#include "executor/cuda/cudnn_conv.h"
#include "executor/cuda/cudnn_ops.h"
#include "executor/device/bf16.h"
#include "executor/device/device_ops.h"
#include "executor/device/device_support.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

using cuda::CudaExec;

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, Precision precision)
      : device_(device), bf16_(precision == Precision::kBf16) {
    PIPETRAIN_CUDA_CHECK(cudaSetDevice(device_));
    PIPETRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    PIPETRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    PIPETRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&inputs_ready_, cudaEventDisableTiming));
    PIPETRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&outputs_ready_, cudaEventDisableTiming));
    PIPETRAIN_CUBLAS_CHECK(cublasCreate(&blas_));
    PIPETRAIN_CUBLAS_CHECK(cublasSetStream(blas_, compute_));
    // Deterministic: no atomics-based reductions inside cuBLAS.
    PIPETRAIN_CUBLAS_CHECK(cublasSetAtomicsMode(blas_, CUBLAS_ATOMICS_NOT_ALLOWED));
    if (cudnnCreate(&cudnn_) != CUDNN_STATUS_SUCCESS)
      throw RuntimeFault("cudnnCreate failed on CUDA device " + std::to_string(device_));
    if (cudnnSetStream(cudnn_, compute_) != CUDNN_STATUS_SUCCESS)
      throw RuntimeFault("cudnnSetStream failed");
  }

  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(compute_);
    cudaStreamSynchronize(copy_);
    memory_.empty_cache();
    cudnnDestroy(cudnn_);
    cublasDestroy(blas_);
    cudaEventDestroy(inputs_ready_);
    cudaEventDestroy(outputs_ready_);
    cudaStreamDestroy(compute_);
    cudaStreamDestroy(copy_);
  }

  std::string name() const override {
    return "cuda:" + std::to_string(device_) + (bf16_ ? " bf16" : "");
  }

  std::string unsupported_reason(const ir::Graph& g, const ir::Node& n) const override {
    return device::support_reason(g, n, kLibrary, "CUDA");
  }

  void run(KernelContext& ctx) override {
    if (device::host_ops().count(ctx.n().op_type)) {
      cpu_->run(ctx);
      return;
    }
    PIPETRAIN_CUDA_CHECK(cudaSetDevice(device_));
    CudaExec ex{compute_, blas_, &memory_, {}};
    device::DeviceOpArgs args;
    args.host = &ctx;
    try {
      stage_in(ctx, ex, args);
      const std::string& op = ctx.n().op_type;
      const bool bf16 = bf16_ && device::bf16_ops().count(op);
      if (bf16) round_floats(ex, args.in);  // staged copies: the host masters stay fp32
      if (!on_library(ex, args)) {
        const auto& ops = device::device_ops<CudaExec>();
        auto it = ops.find(op);
        if (it == ops.end())
          throw UnsupportedOp(ctx.n().describe() + ": the CUDA backend has no kernel for " + op);
        it->second(ex, args);
      }
      if (bf16) round_floats(ex, args.out);
      stage_out(ctx, args);
    } catch (...) {
      cudaStreamSynchronize(compute_);
      cudaStreamSynchronize(copy_);
      release(ex);
      throw;
    }
    release(ex);
  }

 private:
  // cuBLAS and cuDNN for the ops and windows they express; false: the shared kernels run it.
  bool on_library(CudaExec& ex, device::DeviceOpArgs& args) {
    const std::string& op = args.n().op_type;
    if (op == "Gemm") {
      cuda::gemm_op(ex, args);
      return true;
    }
    if (op == "MatMul") {
      cuda::matmul_op(ex, args);
      return true;
    }
    if (op == "Conv" || op == "ConvGrad") return conv_on_cudnn(ex, args);
    if (op == "Softmax" || op == "LogSoftmax")
      return cuda::cudnn_softmax(ex, cudnn_, args, op == "LogSoftmax");
    if (op == "SoftmaxGrad" || op == "LogSoftmaxGrad")
      return cuda::cudnn_softmax_grad(ex, cudnn_, args, op == "LogSoftmaxGrad");
    if (op == "MaxPool" || op == "AveragePool") return cuda::cudnn_pool(ex, cudnn_, args);
    if (op == "MaxPoolGrad" || op == "AveragePoolGrad")
      return cuda::cudnn_pool_grad(ex, cudnn_, args);
    return false;
  }

  // Conv / ConvGrad through cuDNN; false when cuDNN cannot express the window
  // (the shared im2col path runs it then).
  bool conv_on_cudnn(CudaExec& ex, device::DeviceOpArgs& args) {
    const ir::Node& n = args.n();
    if (n.op_type == "Conv") {
      cpu::ConvArgs a =
          device::conv_shapes(n, false, args.in[0].shape, args.in[1].shape, args.out[0].shape);
      if (ir::numel(a.y) == 0) return true;
      a.x_data = args.in[0].data<float>();
      a.w_data = args.in[1].data<float>();
      a.b_data = args.has_in(2) ? args.in[2].data<float>() : nullptr;
      a.y_data = args.out[0].data<float>();
      return cuda::cudnn_conv(ex, cudnn_, a);
    }
    cpu::ConvArgs a =
        device::conv_grad_shapes(n, false, args.in[0].shape, args.in[1].shape, args.in[2].shape);
    if (ir::numel(a.x) == 0 || ir::numel(a.y) == 0 || ir::numel(a.w) == 0) return true;
    a.x_data = args.in[1].data<float>();
    a.w_data = args.in[2].data<float>();
    return cuda::cudnn_conv_grad(ex, cudnn_, a, args.in[0].data<float>(),
                                 args.has_out(0) ? args.out[0].data<float>() : nullptr,
                                 args.has_out(1) ? args.out[1].data<float>() : nullptr,
                                 args.has_out(2) ? args.out[2].data<float>() : nullptr);
  }

  static void round_floats(CudaExec& ex, const std::vector<device::DeviceTensor>& ts) {
    for (const device::DeviceTensor& t : ts)
      if (t.defined() && t.dtype == ir::DType::kF32)
        ex.for_each(t.numel(), device::RoundBf16{t.data<float>()});
  }

  // Inputs to the device on the copy stream; outputs allocated and zeroed
  // (the runner promises zero-filled outputs to kernels that accumulate).
  void stage_in(const KernelContext& ctx, CudaExec& ex, device::DeviceOpArgs& args) {
    for (const ir::Tensor* t : ctx.inputs) {
      if (!t || !t->defined()) {
        args.in.push_back({});
        continue;
      }
      void* p = ex.scratch<std::byte>(static_cast<int64_t>(t->nbytes()));
      if (t->nbytes())
        PIPETRAIN_CUDA_CHECK(
            cudaMemcpyAsync(p, t->raw(), t->nbytes(), cudaMemcpyHostToDevice, copy_));
      args.in.push_back({p, t->dtype(), t->shape()});
    }
    PIPETRAIN_CUDA_CHECK(cudaEventRecord(inputs_ready_, copy_));
    PIPETRAIN_CUDA_CHECK(cudaStreamWaitEvent(compute_, inputs_ready_, 0));
    for (ir::Tensor* t : ctx.outputs) {
      if (!t || !t->defined()) {
        args.out.push_back({});
        continue;
      }
      void* p = ex.scratch<std::byte>(static_cast<int64_t>(t->nbytes()));
      if (t->nbytes()) PIPETRAIN_CUDA_CHECK(cudaMemsetAsync(p, 0, t->nbytes(), compute_));
      args.out.push_back({p, t->dtype(), t->shape()});
    }
  }

  // Outputs back to the host tensors once the compute stream is done.
  void stage_out(KernelContext& ctx, const device::DeviceOpArgs& args) {
    PIPETRAIN_CUDA_CHECK(cudaEventRecord(outputs_ready_, compute_));
    PIPETRAIN_CUDA_CHECK(cudaStreamWaitEvent(copy_, outputs_ready_, 0));
    for (size_t i = 0; i < ctx.outputs.size(); ++i) {
      ir::Tensor* t = ctx.outputs[i];
      if (t && t->defined() && t->nbytes())
        PIPETRAIN_CUDA_CHECK(
            cudaMemcpyAsync(t->raw(), args.out[i].ptr, t->nbytes(), cudaMemcpyDeviceToHost, copy_));
    }
    const cudaError_t err = cudaStreamSynchronize(copy_);
    if (err != cudaSuccess)
      throw RuntimeFault(ctx.n().describe() +
                         ": the CUDA kernel failed: " + cudaGetErrorString(err));
  }

  void release(CudaExec& ex) {
    for (auto& [p, bytes] : ex.temps) memory_.release(p, bytes);
    ex.temps.clear();
  }

  const std::set<std::string> kLibrary = {"Gemm", "MatMul"};
  int device_;
  bool bf16_;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cudaEvent_t inputs_ready_ = nullptr, outputs_ready_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cuda::CachingAllocator memory_;
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int device, Precision precision) {
  const int n = cuda_device_count();
  if (n == 0) throw RuntimeFault("no CUDA device is present");
  if (device < 0 || device >= n)
    throw RuntimeFault("CUDA device " + std::to_string(device) + " does not exist (" +
                       std::to_string(n) + " present)");
  return std::make_unique<CudaBackend>(device, precision);
}

}  // namespace pipetrain::exec
