// A Backend runs IR nodes on one device. The CPU backend is the reference;
// the CUDA backend (executor/cuda) implements the same table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "executor/kernel_context.h"
#include "ir/graph.h"

namespace pipetrain::exec {

/// A device backend's ledger so far: the bytes it moved between host and
/// device, the times the host waited for the device (each download does), and
/// the blocks it took from the device's allocator (the misses of its cache:
/// a cudaMalloc, which synchronises the device, on CUDA).
struct TransferStats {
  size_t to_device = 0, to_host = 0;
  size_t host_syncs = 0, device_allocations = 0;
  TransferStats operator-(const TransferStats& o) const {
    return {to_device - o.to_device, to_host - o.to_host, host_syncs - o.host_syncs,
            device_allocations - o.device_allocations};
  }
  TransferStats& operator+=(const TransferStats& o) {
    to_device += o.to_device;
    to_host += o.to_host;
    host_syncs += o.host_syncs;
    device_allocations += o.device_allocations;
    return *this;
  }
};

/// How a node's kernel treats the memory layout of its 4-D (N, C, H, W)
/// tensors, for the runner's blocked-layout plan (executor/layout_plan.h).
enum class LayoutRole {
  kPlainOnly,   // reads and writes row-major (N, C, H, W) only
  kConvLike,    // the inputs and outputs in LayoutAccess's masks may each be blocked, independently
  kSameLayout,  // its non-scalar inputs and output 0 share one layout, either one
};

/// A node's LayoutRole, with the ports a kConvLike node may take blocked
/// (bit i of `inputs` for input i, of `outputs` for output k): a Conv reads X
/// and writes Y blocked, its gradient reads dY and X and writes dX so.
struct LayoutAccess {
  LayoutRole role = LayoutRole::kPlainOnly;
  uint32_t inputs = 0, outputs = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  /// Empty when the backend can run this node as typed in g; otherwise why not.
  virtual std::string unsupported_reason(const ir::Graph& g, const ir::Node& n) const = 0;
  /// Runs one node; outputs are preallocated with the shapes the IR inferred.
  virtual void run(KernelContext& ctx) = 0;
  /// True when the node's kernel makes output 0 a view of input 0 instead of
  /// writing it (the memory plan then shares the input's storage).
  virtual bool output_is_view(const ir::Node& n) const {
    (void)n;
    return false;
  }
  /// True when the node's kernel writes every element of its outputs, so a
  /// reused buffer need not be zeroed first (others may accumulate into it).
  virtual bool kernel_fills_outputs(const ir::Node& n) const {
    (void)n;
    return false;
  }
  /// True when the node's kernel can add output k to what its buffer holds
  /// (KernelContext::accumulate) instead of overwriting it.
  virtual bool kernel_accumulates(const ir::Node& n, size_t k) const {
    (void)n;
    (void)k;
    return false;
  }
  /// What the node's kernel can do with tensors in the backend's blocked
  /// activation layout (KernelContext::in_blocked): nothing, by default.
  virtual LayoutAccess layout_access(const ir::Graph& g, const ir::Node& n) const {
    (void)g;
    (void)n;
    return {};
  }
  /// True when a tensor like `t` may be stored in the blocked layout (its
  /// channels fill whole blocks, so it takes the bytes a row-major one does).
  virtual bool blockable(const ir::TensorDesc& t) const {
    (void)t;
    return false;
  }
  /// True when kernels write their outputs straight into the host buffers
  /// they are given, so a run may hand them caller-owned ones (gradient
  /// accumulators); a device backend that brings outputs back later says no.
  virtual bool writes_host_outputs() const { return true; }

  // A graph run (ForwardRunner::run) brackets its nodes with begin_run and
  // end_run, so a device backend can keep the tensors its nodes produce in
  // device memory between them (executor/device/residency.h). Between the
  // two, an output's host bytes are current only after to_host(). Outside a
  // run, run() leaves every output on the host.
  virtual void begin_run(uint64_t values_version) { (void)values_version; }
  /// Makes t's host bytes current (the run returns t, or the host reads it).
  virtual void to_host(const ir::Tensor& t) { (void)t; }
  /// The run no longer reads t (its last reader ran).
  virtual void release(const ir::Tensor& t) { (void)t; }
  /// Instead of to_host(): a handle on t that outlives the run (t may be an
  /// arena slot the next run reuses) for a later run of this backend to read,
  /// not the host. The CPU's is a copy; a device backend's keeps the bytes on
  /// the device, the handle's host bytes undefined (a stage's stashed
  /// activations, read again by its backward run).
  virtual ir::Tensor keep(const ir::Tensor& t) { return t.clone(); }
  /// Ends the run (also after an exception); what was not brought to the host
  /// or kept is gone.
  virtual void end_run() {}
  /// Host-device traffic, waits and allocations so far (zero for the CPU backend).
  virtual TransferStats transfers() const { return {}; }
};

/// Arithmetic precision : fp32, or bf16 mixed precision
/// (executor/device/bf16.h: GEMMs, convolutions and LSTMs on bf16-rounded
/// inputs and outputs with fp32 accumulation; fp32 master weights).
enum class Precision { kFp32, kBf16 };

struct CpuBackendOptions {
  /// Convolutions, pools and the elementwise ops between them keep their
  /// activations in the layout oneDNN's convolutions compute in (nChw8c on
  /// AVX2, nhwc on AVX-512: cpu/kernels/blocked_layout.h), so consecutive
  /// convolutions reorder nothing (executor/layout_plan.h). Off: every
  /// tensor row-major (N, C, H, W); the results are bitwise the same.
  bool blocked_layout = true;
  /// bf16: oneDNN's bf16 GEMMs and convolutions (cpu/kernels/bf16.h), with
  /// activations row-major; needs AVX512-BF16 or AMX.
  Precision precision = Precision::kFp32;
  /// Ops whose CPU kernel the kernel check found wrong here run the portable
  /// backend's kernel (executor/kernel_check.h); off for the CPU backend the
  /// portable backend itself holds (its host ops).
  bool portable_fallback = true;
};
/// The CPU backend (OpenBLAS, oneDNN, plain loops; fixed reduction order);
/// PlanError for bf16 on a CPU without bf16 arithmetic.
std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options = {});

/// The device backends' shared kernels (executor/device) run on the host: the
/// CPU tests' way to check the code the CUDA backend runs. For tests, not speed.
std::unique_ptr<Backend> make_portable_backend(Precision precision = Precision::kFp32);
/// The CUDA backend on device `device`; throws RuntimeFault "built without CUDA"
/// in a build without nvcc, or when no device is present.
std::unique_ptr<Backend> make_cuda_backend(int device, Precision precision = Precision::kFp32);
/// "cpu", "cuda" (on `device`) or "portable"; PlanError for another name, or
/// for bf16 on a CPU without bf16 arithmetic.
std::unique_ptr<Backend> make_backend(const std::string& name, int device = 0,
                                      Precision precision = Precision::kFp32);
/// Number of CUDA devices visible (0 in a build without CUDA).
int cuda_device_count();
/// Sets the BLAS/oneDNN thread count used by CPU kernels.
void set_cpu_threads(int threads);

}  // namespace pipetrain::exec
