#include "executor/cuda/cuda_blas.h"

#include <algorithm>

#include "executor/device/matmul_batches.h"
#include "executor/device/ops_elementwise.h"

namespace pipetrain::exec::cuda {

namespace {

/// Y = beta * C broadcast to (m, n) (C: (m, n), (1, n), (n), (m, 1) or scalar).
struct GemmBias {
  const float* c;
  float* y;
  int64_t n, row_stride, col_stride;
  float beta;
  __device__ void operator()(int64_t i) const {
    const int64_t r = i / n, j = i - r * n;
    y[i] = beta * c[r * row_stride + j * col_stride];
  }
};

}  // namespace

void gemm_op(CudaExec& ex, device::DeviceOpArgs& a) {
  const device::DeviceTensor &A = a.in[0], &B = a.in[1], &Y = a.out[0];
  const bool ta = a.n().attr_int("transA", 0) != 0, tb = a.n().attr_int("transB", 0) != 0;
  const float alpha = a.n().attr_float("alpha", 1.0f), beta = a.n().attr_float("beta", 1.0f);
  const int64_t m = Y.shape[0], n = Y.shape[1], k = ta ? A.shape[0] : A.shape[1];
  float acc = 0.0f;
  if (a.has_in(2) && beta != 0.0f) {
    const ir::Shape& cs = a.in[2].shape;
    const int64_t c_rows = cs.size() == 2 ? cs[0] : 1, c_cols = cs.empty() ? 1 : cs.back();
    ex.for_each(m * n, GemmBias{a.in[2].data<float>(), Y.data<float>(), n, c_rows == 1 ? 0 : c_cols,
                                c_cols == 1 ? 0 : 1, beta});
    acc = 1.0f;
  }
  ex.gemm(ta, tb, m, n, k, alpha, A.data<float>(), A.shape[1], B.data<float>(), B.shape[1], acc,
          Y.data<float>(), n);
}

void matmul_op(CudaExec& ex, device::DeviceOpArgs& a) {
  const device::DeviceTensor &A = a.in[0], &B = a.in[1], &Y = a.out[0];
  const auto mb = device::matmul_batches(A.shape, B.shape, a.n().attr_int("transA", 0) != 0,
                                         a.n().attr_int("transB", 0) != 0);
  const int64_t m = mb.m, n = mb.n, k = mb.k;
  if (ir::numel(mb.batch_b) == 1 && !mb.ta) {
    // One B matrix: A's matrices stack into one of rows.
    ex.gemm(false, mb.tb, ir::numel(mb.batch_a) * m, n, k, 1.0f, A.data<float>(), k,
            B.data<float>(), mb.ldb, 0.0f, Y.data<float>(), n);
    return;
  }
  // Broadcast batches: one pointer triple per output matrix, batched.
  const int64_t count = static_cast<int64_t>(mb.offsets.size());
  if (count == 0 || m == 0 || n == 0) return;
  std::vector<const float*> pa, pb;
  std::vector<float*> py;
  for (int64_t t = 0; t < count; ++t) {
    pa.push_back(A.data<float>() + mb.offsets[static_cast<size_t>(t)].first);
    pb.push_back(B.data<float>() + mb.offsets[static_cast<size_t>(t)].second);
    py.push_back(Y.data<float>() + t * m * n);
  }
  if (k == 0) {  // an empty sum: zeros (the outputs arrive zeroed)
    return;
  }
  // Row-major Y = op(A) op(B) is column-major Y^T = op(B)^T op(A)^T.
  const cublasOperation_t op_b = mb.tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_a = mb.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const float alpha = 1.0f, beta = 0.0f;
  if (ex.bf16_tensor_cores) {
    PIPETRAIN_CUBLAS_CHECK(cublasGemmBatchedEx(
        ex.blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha,
        reinterpret_cast<const void* const*>(ex.upload(pb)), CUDA_R_32F, static_cast<int>(mb.ldb),
        reinterpret_cast<const void* const*>(ex.upload(pa)), CUDA_R_32F, static_cast<int>(mb.lda),
        &beta, reinterpret_cast<void* const*>(const_cast<float* const*>(ex.upload(py))), CUDA_R_32F,
        static_cast<int>(n), static_cast<int>(count), CUBLAS_COMPUTE_32F_FAST_16BF,
        CUBLAS_GEMM_DEFAULT));
    return;
  }
  PIPETRAIN_CUBLAS_CHECK(cublasSgemmBatched(
      ex.blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha,
      ex.upload(pb), static_cast<int>(mb.ldb), ex.upload(pa), static_cast<int>(mb.lda), &beta,
      const_cast<float* const*>(ex.upload(py)), static_cast<int>(n), static_cast<int>(count)));
}

}  // namespace pipetrain::exec::cuda
