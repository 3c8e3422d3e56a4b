// bf16 mixed precision on the CPU backend, by the rule of
// executor/device/bf16.h: GEMMs, convolutions and LSTMs read their float
// inputs rounded to bf16, accumulate in fp32 and round their float outputs to
// bf16; the weights stay fp32 (only the copy an op reads is rounded). Gemm,
// MatMul, Conv and ConvGrad run on oneDNN's bf16 kernels (AVX512-BF16 dot
// products or AMX tiles); the others, and the cases oneDNN cannot express,
// run the fp32 kernel on rounded copies, which is the same rule.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "executor/cpu/cpu_kernels.h"

namespace pipetrain::exec::cpu {

/// oneDNN computes bf16 natively on this CPU (AVX512-BF16 or AMX), within
/// the ISA ONEDNN_MAX_CPU_ISA allows.
bool native_bf16();
/// The ISA oneDNN uses here, by its name ("avx2", "avx512_core_amx").
std::string dnnl_isa_name();

/// x[i] = round_bf16(x[i]) (executor/device/bf16.h).
void round_bf16_in_place(float* x, int64_t n);
/// The fp32 kernel `fp32` on bf16-rounded copies of ctx's float inputs (the
/// originals may be master weights), its float outputs then rounded in place.
void run_on_rounded_copies(KernelContext& ctx, const std::function<void(KernelContext&)>& fp32);

/// `data` (n floats) as bf16 (round_bf16's rounding) in oneDNN memory; a
/// graph value (`is_value`) is converted once per values_version.
dnnl::memory bf16_copy(const float* data, int64_t n, bool is_value, uint64_t version);

/// Row-major Y (m, n) = op(A) op(B) over bf16 copies of A and B (lda, ldb:
/// their row lengths as stored) in fp32, Y not rounded; false (nothing
/// written) when oneDNN has no matmul for the case.
bool gemm_on_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  bool a_is_value, const float* b, int64_t ldb, bool b_is_value, uint64_t version,
                  float* y);

/// The bf16 kernels; each falls back to run_on_rounded_copies where oneDNN
/// cannot express the case.
CpuKernel kernel_bf16_Gemm();
CpuKernel kernel_bf16_MatMul();
CpuKernel kernel_bf16_Conv();
CpuKernel kernel_bf16_ConvGrad();

}  // namespace pipetrain::exec::cpu
