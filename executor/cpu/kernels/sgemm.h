// The CPU kernels' f32 GEMM (executor/cpu/kernels/linalg.cc): oneDNN's
// dnnl_sgemm for small products, OpenBLAS for the rest; batches of strided
// products on oneDNN's matmul; products with a weight on oneDNN's brgemm
// matmul where the CPU has it (weight_gemm.cc).
#pragma once

#include <cstdint>

#include "executor/cpu/kernels/kernel_paths.h"
#include "executor/kernel_context.h"

namespace pipetrain::exec::cpu {

/// A Gemm node fused with its ReLU (activation "Relu", ir/passes/fusion.h):
/// max(y, 0) over its output 0 in place, as the Relu node did; nothing for
/// any other node.
void gemm_relu_epilogue(KernelContext& ctx);

/// Row-major C (m, n) = alpha op(A) op(B) + beta C with C's rows ldc apart,
/// on OpenBLAS; where the kernel check avoided OpenBLAS (kernel_paths.h), on
/// oneDNN's sgemm, and where it avoided both, on reference_sgemm. Every
/// product the CPU kernels (and the portable backend's host GEMMs) hand to a
/// BLAS goes through here.
void blas_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

/// The product on one library as it is, avoided or not (kOpenBlasGemm or
/// kDnnlGemm; m, n, k > 0): what the kernel check measures.
void sgemm_on(KernelPath library, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc);

/// blas_sgemm's product in plain loops with double sums: the kernel check's
/// reference, and the last resort when both libraries are avoided.
void reference_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

/// Row-major Y (m, n) = alpha op(A) op(B) + beta Y; lda / ldb are the row
/// lengths of A and B as stored, Y's is n. Small products on oneDNN's sgemm,
/// the rest on blas_sgemm (either library alone where the check avoided the other).
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* y);

/// `count` products Y_c = alpha op(A_c) op(B_c) + beta Y_c, matrix c at
/// offsets c stride_a, c stride_b, c stride_y (row lengths lda, ldb, ldy), as
/// one oneDNN matmul whose threads share out the matrices.
void sgemm_batched(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                   float beta, float* y, int64_t ldy, int64_t stride_y, int64_t count);

/// Y (m, n) = alpha op(A) op(W) (+ a bias row of n) (+ Y when `accumulate`),
/// W a weight (a graph value), or an activation where the caller measured
/// brgemm faster (linalg.cc: wide weight gradients). Nothing is cached of W.
struct WeightGemm {
  int64_t m = 0, n = 0, k = 0, lda = 0, ldw = 0;
  bool ta = false, tw = false, bias = false, accumulate = false;
  float alpha = 1.0f;
};

/// WeightGemm on oneDNN's brgemm matmul (weight_gemm.cc); false where this
/// CPU has no such matmul (nothing written: use sgemm).
bool sgemm_weight(const WeightGemm& g, const float* a, const float* w, const float* bias, float* y);

}  // namespace pipetrain::exec::cpu
