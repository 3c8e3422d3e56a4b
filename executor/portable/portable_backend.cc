// The portable backend: the device backends' shared op implementations
// (executor/device) run by a host Exec, one loop iteration per element where
// a GPU runs one thread, and cblas for the GEMMs inside them. It exists so the
// CPU test suite checks, op by op against the CPU backend, the very code the
// CUDA backend compiles, and the device residency the CUDA backend keeps: its
// "device" is separate host memory, and the host copy of a tensor whose
// newest bytes are there is poisoned (NaN) until it comes back. The library
// ops (Gemm, MatMul: cuBLAS calls on the GPU) and host ops go to the CPU
// kernels on host copies.
#include <cstdlib>
#include <cstring>
#include <deque>

#include <cblas.h>

#include "executor/backend.h"
#include "executor/cpu/kernels/bf16.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/device/bf16.h"
#include "executor/device/block_cache.h"
#include "executor/device/device_ops.h"
#include "executor/device/device_support.h"
#include "executor/device/host_exec.h"
#include "executor/device/residency.h"
#include "executor/device/resident_node.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

using device::HostExec;

// The portable backend's "device": host memory of its own, cached as the CUDA
// backend caches its device's (device::BlockCache), so the tests count the
// allocations a CUDA run makes.
class HostMemory final : public device::DeviceMemory {
 public:
  void* allocate(size_t bytes) override { return cache_.allocate(bytes); }
  void release(void* p, size_t bytes) override { cache_.release(p, bytes); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  size_t device_allocations() const override { return cache_.device_allocations(); }

 private:
  // Size classes are multiples of 512 bytes: aligned_alloc's size rule holds.
  device::BlockCache cache_{[](size_t bytes) { return std::aligned_alloc(64, bytes); },
                            [](void* p) { std::free(p); }};
};

class PortableBackend final : public Backend {
 public:
  explicit PortableBackend(Precision precision) : bf16_(precision == Precision::kBf16) {}
  std::string name() const override { return bf16_ ? "portable-bf16" : "portable"; }

  std::string unsupported_reason(const ir::Graph& g, const ir::Node& n) const override {
    return device::support_reason(g, n, kLibrary, "portable");
  }
  // Device ops get zeroed device buffers (Residency::output): the host
  // buffer needs zeroing only for what runs on the host.
  bool kernel_fills_outputs(const ir::Node& n) const override {
    return device::device_ops<HostExec>().count(n.op_type) ? true : cpu_->kernel_fills_outputs(n);
  }

  // Outputs live on the device until to_host(): the runner adds gradients itself.
  bool writes_host_outputs() const override { return false; }
  void begin_run(uint64_t values_version) override { residency_.begin_run(values_version); }
  void to_host(const ir::Tensor& t) override { residency_.to_host(t); }
  void release(const ir::Tensor& t) override { residency_.release(t); }
  ir::Tensor keep(const ir::Tensor& t) override { return residency_.keep(t); }
  void end_run() override { residency_.end_run(); }
  TransferStats transfers() const override {
    return {residency_.uploaded_bytes(), residency_.downloaded_bytes(), residency_.downloads(),
            memory_.device_allocations()};
  }

  void run(KernelContext& ctx) override {
    cpu::apply_dnnl_threads();  // for the GEMMs in OpenBLAS, as the CPU backend's kernels
    device::run_in_a_run(residency_, ctx, [&] { run_node(ctx); });
  }

 private:
  void run_node(KernelContext& ctx) {
    const std::string& op = ctx.n().op_type;
    const bool bf16 = bf16_ && device::bf16_ops().count(op);
    const auto& ops = device::device_ops<HostExec>();
    auto it = ops.find(op);
    if (it == ops.end()) return run_on_host(ctx, bf16);  // host and library ops
    HostExec ex;
    device::DeviceOpArgs args = device::resident_args(residency_, ex, ctx, bf16);
    it->second(ex, args);
    if (bf16) device::round_outputs_bf16(ex, args);
  }

  // The CPU kernel on host copies: the inputs brought back, the outputs'
  // device copies (now out of date) dropped.
  void run_on_host(KernelContext& ctx, bool bf16) {
    for (const ir::Tensor* t : ctx.inputs)
      if (t && t->defined()) residency_.to_host(*t);
    for (const ir::Tensor* t : ctx.outputs)
      if (t && t->defined()) residency_.host_wrote(*t);
    if (!bf16) return cpu_->run(ctx);
    // The fp32 CPU kernel on rounded copies of the float inputs (the
    // originals may be master weights), the outputs rounded in place.
    cpu::run_on_rounded_copies(ctx, [this](KernelContext& c) { cpu_->run(c); });
  }

  const bool bf16_;
  const std::set<std::string> kLibrary = {"Gemm", "MatMul"};
  std::unique_ptr<Backend> cpu_ = [] {
    CpuBackendOptions options;
    options.portable_fallback = false;  // no portable backend inside this one
    return make_cpu_backend(options);
  }();
  HostMemory memory_;
  device::Residency residency_{memory_, /*poison_stale=*/true};
};

}  // namespace

std::unique_ptr<Backend> make_portable_backend(Precision precision) {
  return std::make_unique<PortableBackend>(precision);
}

}  // namespace pipetrain::exec
