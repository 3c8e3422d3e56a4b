// The host Exec policy of the shared op implementations: for_each is a plain
// loop, scratch and uploads are host buffers alive until the op ends, GEMMs
// go to the CPU kernels' blas_sgemm. The portable backend runs every shared op with it; the CPU
// backend runs the ops whose only implementation is the shared one
// (cpu/kernels/shared_kernel.h) with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

#include "executor/cpu/kernels/sgemm.h"

namespace pipetrain::exec::device {

struct HostExec {
  std::deque<std::vector<std::byte>> buffers;  // uploads and scratch, alive until the op ends

  template <typename F>
  void for_each(int64_t n, const F& f) {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
  template <typename T>
  const T* upload(const std::vector<T>& v) {
    T* p = scratch<T>(static_cast<int64_t>(v.size()));
    if (!v.empty()) std::memcpy(p, v.data(), v.size() * sizeof(T));
    return p;
  }
  /// Row-major C (m, n) = alpha op(A) op(B) + beta C (blas_sgemm handles the empty cases).
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
            int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    cpu::blas_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  /// `count` products, matrix c of A, B and C at c stride_a, c stride_b, c stride_c.
  void gemm_batched(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                    float beta, float* c, int64_t ldc, int64_t stride_c, int64_t count) {
    for (int64_t i = 0; i < count; ++i)
      gemm(ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
           c + i * stride_c, ldc);
  }
  /// Floats of operands the fused attention gathers per block when it reads
  /// them through absorbed layouts (ops_attention.h): a few matrices, so
  /// they are reread from the cache.
  int64_t attention_gather_elems() const { return int64_t{1} << 17; }
  /// Workers that share out `blocks` independent blocks of an op, and
  /// f(exec, w) run for each: here one, on this Exec.
  int64_t block_workers(int64_t) const { return 1; }
  template <typename F>
  void run_workers(int64_t workers, const F& f) {
    for (int64_t w = 0; w < workers; ++w) f(*this, w);
  }
  template <typename T>
  T* scratch(int64_t count) {
    buffers.emplace_back(static_cast<size_t>(count) * sizeof(T) + sizeof(double));
    return reinterpret_cast<T*>(buffers.back().data());
  }
};

}  // namespace pipetrain::exec::device
