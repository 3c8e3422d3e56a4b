// CPU kernels of the fused Attention and AttentionGrad: the shared
// implementation (device/ops_attention.h) with its batched GEMMs on oneDNN's
// matmul (sgemm_batched), whose threads share out a block's matrices, and
// its row work split over the same threads.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/cpu/kernels/sgemm.h"
#include "executor/cpu/kernels/shared_kernel.h"
#include "executor/device/ops_attention.h"

namespace pipetrain::exec::cpu {

namespace {

struct CpuExec : device::HostExec {
  /// Scratch from buffers the calling thread keeps between calls: a fresh
  /// block of scores each call cost its page faults and zeroing every time.
  template <typename T>
  T* scratch(int64_t count) {
    thread_local std::vector<std::vector<std::byte>> kept;
    if (kept.size() <= used) kept.emplace_back();
    std::vector<std::byte>& b = kept[used++];
    const size_t bytes = static_cast<size_t>(count) * sizeof(T) + sizeof(double);
    if (b.size() < bytes) b.resize(bytes);
    return reinterpret_cast<T*>(b.data());
  }
  size_t used = 0;  // buffers handed out in this op

  /// The shared code's for_each calls are independent by construction (a GPU
  /// launch), so they split over threads. Its items here are query rows of
  /// Lk scores (mask, softmax, dropout) or elements of a gradient to zero;
  /// a row is priced at 256 element operations, so that a block of 64 rows
  /// or more splits and the two-element dropout state does not.
  template <typename F>
  void for_each(int64_t n, const F& f) {
    parallel_for(
        n, n * 256,
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) f(i);
        },
        1);
  }

  /// Blocks of a few matrices, reread from the cache (1 << 17 floats: a
  /// transformer step's AttentionGrad + Attention 10.4 + 5.2 ms on one
  /// thread, against 12.9 + 6.2 with one block of all 64 matrices).
  int64_t attention_gather_elems() const { return int64_t{1} << 17; }

  /// One worker a thread, each taking whole blocks with its loops and GEMMs
  /// on itself: splitting every gather, GEMM and row pass of a small block
  /// over the threads instead was a hand-off each (34 + 17.5 ms on two
  /// threads for the step above).
  int64_t block_workers(int64_t blocks) const {
    return std::clamp<int64_t>(dnnl_threads(), 1, blocks);
  }
  template <typename F>
  void run_workers(int64_t workers, const F& f) {
    if (workers <= 1) {
      f(*this, 0);
      return;
    }
    // Work priced so that parallel_for forks one part per worker; inside,
    // the worker's loops and oneDNN's GEMMs stay on its thread (nested).
    parallel_for(
        workers, workers * (int64_t{1} << 40),
        [&](int64_t begin, int64_t end) {
          CpuExec own;
          for (int64_t w = begin; w < end; ++w) f(own, w);
        },
        1);
  }

  void gemm_batched(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                    float beta, float* c, int64_t ldc, int64_t stride_c, int64_t count) {
    sgemm_batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                  stride_c, count);
  }
};

}  // namespace

CpuKernel kernel_Attention() {
  return {shared_kernel_on<CpuExec, &device::attention_op<CpuExec>>, {ir::DType::kF32}, 0};
}
CpuKernel kernel_AttentionGrad() {
  return {shared_kernel_on<CpuExec, &device::attention_grad_op<CpuExec>>, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
