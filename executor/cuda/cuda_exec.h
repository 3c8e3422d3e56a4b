// The Exec policy of the CUDA backend: the shared op implementations
// (executor/device) call for_each, which launches a grid-stride kernel of
// their functor on the worker's compute stream; upload and scratch give
// device buffers that live until the op's stream work is done. nvcc only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "executor/cuda/caching_allocator.h"
#include "executor/cuda/cuda_check.h"

namespace pipetrain::exec::cuda {

template <typename F>
__global__ void for_each_kernel(int64_t n, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    f(i);
}

/// C (m, n) with leading dimension ldc = beta C (an empty GEMM sum).
struct ScaleMatrix {
  float* c;
  int64_t n, ldc;
  float beta;
  __device__ void operator()(int64_t i) const {
    float& v = c[(i / n) * ldc + i % n];
    v = beta == 0.0f ? 0.0f : beta * v;
  }
};

struct CudaExec {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  CachingAllocator* memory = nullptr;
  std::vector<std::pair<void*, size_t>> temps;  // released by the backend after the op
  /// Under bf16 mixed precision an op's inputs are bf16 values already, so
  /// CUBLAS_COMPUTE_32F_FAST_16BF runs its GEMMs on bf16 tensor cores with
  /// fp32 accumulation, exactly where the operands are those inputs; an LSTM's
  /// recurrent state, computed inside the op, is rounded there too (as
  /// autocast's bf16 LSTM computes it). fp32 keeps plain SGEMM.
  bool bf16_tensor_cores = false;

  static constexpr int kThreads = 256;
  static constexpr int64_t kMaxBlocks = 65535;

  template <typename F>
  void for_each(int64_t n, const F& f) {
    if (n <= 0) return;
    const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
    for_each_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(n, f);
    PIPETRAIN_CUDA_CHECK(cudaGetLastError());
  }

  /// Row-major C (m, n) = alpha op(A) op(B) + beta C on cuBLAS, through the
  /// column-major identity C^T = op(B)^T op(A)^T.
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) {
      for_each(m * n, ScaleMatrix{c, n, ldc, beta});
      return;
    }
    const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                            op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (bf16_tensor_cores) {
      PIPETRAIN_CUBLAS_CHECK(cublasGemmEx(
          blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha,
          b, CUDA_R_32F, static_cast<int>(ldb), a, CUDA_R_32F, static_cast<int>(lda), &beta, c,
          CUDA_R_32F, static_cast<int>(ldc), CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
      return;
    }
    PIPETRAIN_CUBLAS_CHECK(cublasSgemm(blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                                       static_cast<int>(k), &alpha, b, static_cast<int>(ldb), a,
                                       static_cast<int>(lda), &beta, c, static_cast<int>(ldc)));
  }
  /// `count` products, matrix c of A, B and C at c stride_a, c stride_b, c
  /// stride_c: one strided-batched cuBLAS call.
  void gemm_batched(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                    float beta, float* c, int64_t ldc, int64_t stride_c, int64_t count) {
    if (m == 0 || n == 0 || count == 0) return;
    if (k == 0) {
      for (int64_t i = 0; i < count; ++i)
        for_each(m * n, ScaleMatrix{c + i * stride_c, n, ldc, beta});
      return;
    }
    const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                            op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (bf16_tensor_cores) {
      PIPETRAIN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha,
          b, CUDA_R_32F, static_cast<int>(ldb), stride_b, a, CUDA_R_32F, static_cast<int>(lda),
          stride_a, &beta, c, CUDA_R_32F, static_cast<int>(ldc), stride_c, static_cast<int>(count),
          CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
      return;
    }
    PIPETRAIN_CUBLAS_CHECK(cublasSgemmStridedBatched(
        blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
        static_cast<int>(ldb), stride_b, a, static_cast<int>(lda), stride_a, &beta, c,
        static_cast<int>(ldc), stride_c, static_cast<int>(count)));
  }
  /// The fused attention's gathered block (ops_attention.h): every matrix
  /// the score block holds at once, so a block is a few launches.
  int64_t attention_gather_elems() const { return int64_t{1} << 24; }
  /// Blocks of an op run one after another on the stream (each launch is
  /// parallel already).
  int64_t block_workers(int64_t) const { return 1; }
  template <typename F>
  void run_workers(int64_t workers, const F& f) {
    for (int64_t w = 0; w < workers; ++w) f(*this, w);
  }
  template <typename T>
  T* scratch(int64_t count) {
    const size_t bytes = static_cast<size_t>(count > 0 ? count : 1) * sizeof(T);
    void* p = memory->allocate(bytes);
    temps.emplace_back(p, bytes);
    return static_cast<T*>(p);
  }

  /// A device copy of v (pageable source: the copy is staged before returning).
  template <typename T>
  const T* upload(const std::vector<T>& v) {
    T* p = scratch<T>(static_cast<int64_t>(v.size()));
    if (!v.empty())
      PIPETRAIN_CUDA_CHECK(
          cudaMemcpyAsync(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    return p;
  }
};

}  // namespace pipetrain::exec::cuda
