#include "executor/cuda/cuda_blas.h"

#include <algorithm>

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
  const ir::Shape &as = A.shape, &bs = B.shape;
  const int64_t m = as.size() >= 2 ? as[as.size() - 2] : 1, k = as.back();
  const int64_t n = bs.size() >= 2 ? bs.back() : 1;
  const ir::Shape batch_a(as.begin(), as.end() - (as.size() >= 2 ? 2 : 1));
  const ir::Shape batch_b(bs.begin(), bs.end() - (bs.size() >= 2 ? 2 : 1));
  if (ir::numel(batch_b) == 1) {
    ex.gemm(false, false, ir::numel(batch_a) * m, n, k, 1.0f, A.data<float>(), k, B.data<float>(),
            n, 0.0f, Y.data<float>(), n);
    return;
  }
  // Broadcast batches: one pointer triple per output matrix, batched.
  const size_t rank = std::max(batch_a.size(), batch_b.size());
  ir::Shape batch(rank);
  std::vector<int64_t> stride_a(rank, 0), stride_b(rank, 0);
  int64_t sa = m * k, sb = k * n;
  for (size_t i = rank; i-- > 0;) {
    const size_t ia = i + batch_a.size(), ib = i + batch_b.size();
    const int64_t da = ia >= rank ? batch_a[ia - rank] : 1;
    const int64_t db = ib >= rank ? batch_b[ib - rank] : 1;
    batch[i] = std::max(da, db);
    stride_a[i] = da == 1 ? 0 : sa;
    stride_b[i] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  const int64_t count = ir::numel(batch);
  if (count == 0 || m == 0 || n == 0) return;
  std::vector<const float*> pa, pb;
  std::vector<float*> py;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t t = 0; t < count; ++t) {
    int64_t oa = 0, ob = 0;
    for (size_t i = 0; i < rank; ++i) {
      oa += idx[i] * stride_a[i];
      ob += idx[i] * stride_b[i];
    }
    pa.push_back(A.data<float>() + oa);
    pb.push_back(B.data<float>() + ob);
    py.push_back(Y.data<float>() + t * m * n);
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < batch[i]) break;
      idx[i] = 0;
    }
  }
  const float alpha = 1.0f, beta = 0.0f;
  PIPETRAIN_CUBLAS_CHECK(cublasSgemmBatched(
      ex.blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
      static_cast<int>(k), &alpha, ex.upload(pb), static_cast<int>(n), ex.upload(pa),
      static_cast<int>(k), &beta, const_cast<float* const*>(ex.upload(py)), static_cast<int>(n),
      static_cast<int>(count)));
}

}  // namespace pipetrain::exec::cuda
