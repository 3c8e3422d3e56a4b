// The CUDA backend. Each node runs the shared op implementations
// (executor/device) through CudaExec, cuBLAS for Gemm/MatMul, cuDNN for
// convolutions, softmax and pooling where it expresses them exactly; shape
// metadata ops (Shape, Constant, ...) run on the host. Tensors stay on the
// device for the whole graph run (executor/device/residency.h): a run's
// feeds and the graph's values go up once (values stay cached while the
// run's values_version holds), the tensors its nodes produce never leave the
// device unless the host reads them (the run's outputs, host ops' inputs,
// the few inputs an op reads on the host). Copies run on the copy stream,
// kernels on the compute stream, ordered by events (cuda_memory.h); buffers
// come from a caching allocator.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <set>
#include <string>

#include "executor/backend.h"
#include "executor/cuda/caching_allocator.h"
#include "executor/cuda/cuda_blas.h"
#include "executor/cuda/cuda_exec.h"
#include "executor/cuda/cuda_memory.h"
#include "executor/cuda/cudnn_conv.h"
#include "executor/cuda/cudnn_ops.h"
#include "executor/device/bf16.h"
#include "executor/device/device_ops.h"
#include "executor/device/device_support.h"
#include "executor/device/residency.h"
#include "executor/device/resident_node.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

using cuda::CudaExec;

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, Precision precision)
      : device_(device), bf16_(precision == Precision::kBf16) {
    PIPETRAIN_CUDA_CHECK(cudaSetDevice(device_));
    PIPETRAIN_CUBLAS_CHECK(cublasCreate(&blas_));
    PIPETRAIN_CUBLAS_CHECK(cublasSetStream(blas_, memory_.compute()));
    // Deterministic: no atomics-based reductions inside cuBLAS.
    PIPETRAIN_CUBLAS_CHECK(cublasSetAtomicsMode(blas_, CUBLAS_ATOMICS_NOT_ALLOWED));
    if (cudnnCreate(&cudnn_) != CUDNN_STATUS_SUCCESS)
      throw RuntimeFault("cudnnCreate failed on CUDA device " + std::to_string(device_));
    if (cudnnSetStream(cudnn_, memory_.compute()) != CUDNN_STATUS_SUCCESS)
      throw RuntimeFault("cudnnSetStream failed");
  }

  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaDeviceSynchronize();
    cudnnDestroy(cudnn_);
    cublasDestroy(blas_);
  }

  std::string name() const override {
    return "cuda:" + std::to_string(device_) + (bf16_ ? " bf16" : "");
  }

  std::string unsupported_reason(const ir::Graph& g, const ir::Node& n) const override {
    return device::support_reason(g, n, kLibrary, "CUDA");
  }
  // Device ops get zeroed device buffers (Residency::output): the host
  // buffer needs zeroing only for the host ops.
  bool kernel_fills_outputs(const ir::Node& n) const override {
    return device::host_ops().count(n.op_type) ? cpu_->kernel_fills_outputs(n) : true;
  }

  // Outputs live on the device until to_host(): the runner adds gradients itself.
  bool writes_host_outputs() const override { return false; }
  void begin_run(uint64_t values_version) override { residency_.begin_run(values_version); }
  void to_host(const ir::Tensor& t) override {
    PIPETRAIN_CUDA_CHECK(cudaSetDevice(device_));
    residency_.to_host(t);
  }
  void release(const ir::Tensor& t) override { residency_.release(t); }
  ir::Tensor keep(const ir::Tensor& t) override { return residency_.keep(t); }
  void end_run() override { residency_.end_run(); }
  TransferStats transfers() const override {
    return {residency_.uploaded_bytes(), residency_.downloaded_bytes(), residency_.downloads(),
            allocator_.device_allocations()};
  }

  void run(KernelContext& ctx) override {
    PIPETRAIN_CUDA_CHECK(cudaSetDevice(device_));
    device::run_in_a_run(residency_, ctx, [&] { run_node(ctx); });
  }

 private:
  // cuBLAS and cuDNN for the ops and windows they express; false: the shared kernels run it.
  bool on_library(CudaExec& ex, device::DeviceOpArgs& args) {
    const std::string& op = args.n().op_type;
    if (op == "Gemm") {
      cuda::gemm_op(ex, args);
      device::fused_epilogue(ex, args.n(), args.out[0].data<float>(), nullptr, args.out[0].numel());
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
      if (!cuda::cudnn_conv(ex, cudnn_, conv_algos_, a)) return false;  // the shared path's
      device::fused_epilogue(ex, n, a.y_data, args.has_in(3) ? args.in[3].data<float>() : nullptr,
                             ir::numel(a.y));
      return true;
    }
    cpu::ConvArgs a =
        device::conv_grad_shapes(n, false, args.in[0].shape, args.in[1].shape, args.in[2].shape);
    if (ir::numel(a.x) == 0 || ir::numel(a.y) == 0 || ir::numel(a.w) == 0) return true;
    a.x_data = args.in[1].data<float>();
    a.w_data = args.in[2].data<float>();
    return cuda::cudnn_conv_grad(ex, cudnn_, conv_algos_, a, args.in[0].data<float>(),
                                 args.has_out(0) ? args.out[0].data<float>() : nullptr,
                                 args.has_out(1) ? args.out[1].data<float>() : nullptr,
                                 args.has_out(2) ? args.out[2].data<float>() : nullptr);
  }

  void run_node(KernelContext& ctx) {
    const std::string& op = ctx.n().op_type;
    if (device::host_ops().count(op)) {
      // Shape metadata on the host: its inputs brought back, its outputs' device copies dropped.
      for (const ir::Tensor* t : ctx.inputs)
        if (t && t->defined()) residency_.to_host(*t);
      for (const ir::Tensor* t : ctx.outputs)
        if (t && t->defined()) residency_.host_wrote(*t);
      cpu_->run(ctx);
      return;
    }
    const bool bf16 = bf16_ && device::bf16_ops().count(op);
    CudaExec ex{memory_.compute(), blas_, &allocator_, {}, bf16};
    try {
      device::DeviceOpArgs args = device::resident_args(residency_, ex, ctx, bf16);
      if (!on_library(ex, args)) {
        const auto& ops = device::device_ops<CudaExec>();
        auto it = ops.find(op);
        if (it == ops.end())
          throw UnsupportedOp(ctx.n().describe() + ": the CUDA backend has no kernel for " + op);
        it->second(ex, args);
      }
      if (bf16) device::round_outputs_bf16(ex, args);
    } catch (...) {
      cudaDeviceSynchronize();
      release_scratch(ex);
      throw;
    }
    release_scratch(ex);
  }

  // Scratch goes back to the cache: later work on the compute stream is
  // ordered after this op's, and uploads wait for the compute stream.
  void release_scratch(CudaExec& ex) {
    for (auto& [p, bytes] : ex.temps) allocator_.release(p, bytes);
    ex.temps.clear();
  }

  const std::set<std::string> kLibrary = {"Gemm", "MatMul"};
  int device_;
  bool bf16_;
  // Destroyed in reverse: residency returns its blocks to the allocator, the
  // streams are synchronised, then the allocator frees the blocks.
  cuda::CachingAllocator allocator_;
  cuda::CudaMemory memory_{device_, allocator_};
  device::Residency residency_{memory_};
  cublasHandle_t blas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cuda::ConvAlgorithms conv_algos_;
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
