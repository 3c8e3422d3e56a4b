// The library kernel paths the CPU backend can choose among, and what the
// kernel check (executor/kernel_check.h) decided about them. A path the check
// found wrong on this machine is avoided: its callers take their other path
// (oneDNN's sgemm for OpenBLAS's and the other way round, im2col + GEMM for
// oneDNN's convolutions, OpenBLAS for oneDNN's matmuls). An op whose own
// kernel disagrees is avoided in the blocked layout only (it then computes
// row-major) or altogether (the CPU backend runs the portable backend's
// kernel for it).
//
// Tests of the check inject wrong results: PIPETRAIN_INJECT_KERNEL_FAULT is a
// comma-separated list of path names ("openblas-gemm") and op types
// ("MaxPoolGrad", or "MaxPoolGrad:blocked" for its blocked-layout runs only);
// each named kernel then returns one element visibly off.
#pragma once

#include <cstdint>
#include <set>
#include <string>

namespace pipetrain::exec::cpu {

enum class KernelPath : int {
  kOpenBlasGemm,  // cblas_sgemm
  kDnnlGemm,      // dnnl_sgemm (the small products)
  kDnnlMatmul,    // oneDNN's matmul primitive: weight products (brgemm) and batched products
  kDnnlConv,      // oneDNN's convolution forward
  kDnnlConvGrad,  // oneDNN's convolution backward data and weights
};
constexpr int kKernelPathCount = 5;

/// "openblas-gemm", "onednn-gemm", "onednn-matmul", "onednn-conv", "onednn-conv-grad".
const char* kernel_path_name(KernelPath p);

bool path_avoided(KernelPath p);
void set_path_avoided(KernelPath p, bool avoided);

/// Ops whose CPU kernel is avoided in every layout / in the blocked layout only.
struct AvoidedOps {
  std::set<std::string> everywhere, blocked;
};
AvoidedOps avoided_ops();
void avoid_op(const std::string& op, bool blocked_only);

/// Every path and op back in use (the kernel check's tests).
void clear_avoided();

bool fault_injected(KernelPath p);
/// Whether the op's kernel is to return a wrong result in this layout.
bool op_fault_injected(const std::string& op, bool blocked);
/// Replaces the faults PIPETRAIN_INJECT_KERNEL_FAULT named ("" for none).
void set_injected_faults(const std::string& spec);
/// Makes y[n / 2] visibly wrong: the injected fault.
void inject_error(float* y, int64_t n);

}  // namespace pipetrain::exec::cpu
