// Gemm and MatMul (f32) on OpenBLAS cblas_sgemm, and on oneDNN's dnnl_sgemm
// for small products (the attention heads' per-batch matrices), where it was
// measured ~30% faster on one AVX2 thread (64 x (128, 64) @ (64, 128):
// 1.8 vs 2.8 ms); on the large ones (1024 x 512 x 2048) the two are within
// noise of each other. A batch of small products of one shape runs as one
// oneDNN matmul primitive (one OpenMP fork for the batch, not one a matrix).
#include <algorithm>
#include <cassert>
#include <vector>

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/blas_core.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/cpu/kernels/dnnl_util.h"
#include "executor/cpu/kernels/kernel_paths.h"
#include "executor/cpu/kernels/sgemm.h"
#include "executor/device/elementwise_math.h"
#include "executor/device/matmul_batches.h"

namespace pipetrain::exec::cpu {

// Products with at most this many multiply-adds go to dnnl_sgemm.
constexpr int64_t kSmallGemm = int64_t{1} << 22;

namespace {

// Y = beta Y for an empty sum (BLAS may leave Y alone).
void scale_rows(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

void dnnl_product(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  apply_dnnl_threads();  // dnnl_sgemm runs on the calling thread's OpenMP team
  [[maybe_unused]] dnnl_status_t st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  assert(st == dnnl_success);
  if (fault_injected(KernelPath::kDnnlGemm)) inject_error(c, 1);
}

void openblas_product(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                      float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  if (fault_injected(KernelPath::kOpenBlasGemm)) inject_error(c, 1);
}

// OpenBLAS unless the kernel check avoided it, or it fell back to its SSE3
// kernels here (blas_core.h) and oneDNN's sgemm is there to take over.
bool on_openblas() {
  if (path_avoided(KernelPath::kOpenBlasGemm)) return false;
  return !openblas_fell_back() || path_avoided(KernelPath::kDnnlGemm);
}

}  // namespace

void sgemm_on(KernelPath library, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) {
  if (library == KernelPath::kDnnlGemm)
    return dnnl_product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  openblas_product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void reference_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum +=
            double(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      float& y = c[i * ldc + j];
      y = static_cast<float>(alpha * sum + (beta == 0.0f ? 0.0 : double(beta) * y));
    }
}

void blas_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_rows(m, n, beta, c, ldc);
  if (on_openblas()) return openblas_product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (!path_avoided(KernelPath::kDnnlGemm))
    return dnnl_product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  reference_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* y) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_rows(m, n, beta, y, n);
  const bool small = m * n * k <= kSmallGemm || !on_openblas();
  if (small && !path_avoided(KernelPath::kDnnlGemm))
    return dnnl_product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, y, n);
  blas_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, y, n);
}

namespace {

/// One oneDNN matmul over strided batches (sgemm_batched), cached by its
/// geometry: its threads share out the matrices.
struct StridedMatmul {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, y, scratch;
};

}  // namespace

void sgemm_batched(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                   float beta, float* y, int64_t ldy, int64_t stride_y, int64_t count) {
  if (m == 0 || n == 0 || count == 0) return;
  if (path_avoided(KernelPath::kDnnlMatmul)) {  // the kernel check found oneDNN's matmul wrong
    for (int64_t c = 0; c < count; ++c)
      blas_sgemm(ta, tb, m, n, k, alpha, a + c * stride_a, lda, b + c * stride_b, ldb, beta,
                 y + c * stride_y, ldy);
    return;
  }
  if (k == 0) {  // empty sums: Y = beta * Y
    for (int64_t c = 0; c < count; ++c)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          float& v = y[c * stride_y + i * ldy + j];
          v = beta == 0.0f ? 0.0f : beta * v;
        }
    return;
  }
  const ir::Shape sa = ta ? ir::Shape{stride_a, 1, lda} : ir::Shape{stride_a, lda, 1};
  const ir::Shape sb = tb ? ir::Shape{stride_b, 1, ldb} : ir::Shape{stride_b, ldb, 1};
  const ir::Shape sy = {stride_y, ldy, 1};
  const std::string key = "strided matmul " + dnnl_util::key_of({count, m, n, k}) +
                          dnnl_util::key_of(sa) + dnnl_util::key_of(sb) + dnnl_util::key_of(sy) +
                          " alpha " + std::to_string(alpha) + (beta != 0.0f ? " acc" : "") +
                          " threads " + std::to_string(dnnl_threads());
  auto p = dnnl_util::cached_as<StridedMatmul>(key, [&] {
    auto r = std::make_shared<StridedMatmul>();
    r->a = dnnl_util::plain_desc({count, m, k}, sa);
    r->b = dnnl_util::plain_desc({count, k, n}, sb);
    r->y = dnnl_util::plain_desc({count, m, n}, sy);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(r->a, r->b, r->y),
                                    dnnl_util::matmul_attr(alpha, beta), dnnl_util::engine());
    r->scratch = pd.scratchpad_desc();
    r->prim = dnnl::matmul(pd);
    return r;
  });
  apply_dnnl_threads();
  auto& eng = dnnl_util::engine();
  auto& s = dnnl_util::stream();
  p->prim.execute(s, {{DNNL_ARG_SRC, dnnl::memory(p->a, eng, const_cast<float*>(a))},
                      {DNNL_ARG_WEIGHTS, dnnl::memory(p->b, eng, const_cast<float*>(b))},
                      {DNNL_ARG_DST, dnnl::memory(p->y, eng, y)},
                      {DNNL_ARG_SCRATCHPAD, dnnl_util::scratchpad(p->scratch)}});
  s.wait();
  if (fault_injected(KernelPath::kDnnlMatmul)) inject_error(y + (count - 1) * stride_y, 1);
}

void gemm_relu_epilogue(KernelContext& ctx) {
  if (ctx.n().attr_string("activation", "") != "Relu") return;
  float* y = ctx.out(0).data<float>();
  parallel_for(ctx.out(0).numel(), ctx.out(0).numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = device::ReluFn{}(y[i]);
  });
}

namespace {

namespace du = dnnl_util;

// Small products of one batch shape (the attention heads': 64 of 64 x 64 x
// 64) as one oneDNN matmul primitive, whose threads share out the matrices.
// dnnl_sgemm per matrix forked its OpenMP team per matrix: on 2 threads those
// 64 products took 1.45 ms against 0.41 on one. Strides express transA /
// transB; `accumulate` adds into Y (a sum post-op). False: broadcast batches.
struct BatchedMatmul {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, y, scratch;
};

bool batched_on_dnnl(const device::MatmulBatches& mb, const float* a, const float* b, float* y,
                     bool accumulate) {
  if (mb.batch_a != mb.batch_b || mb.offsets.size() < 2 || mb.m * mb.n * mb.k == 0) return false;
  if (path_avoided(KernelPath::kDnnlMatmul)) return false;
  const int64_t batch = static_cast<int64_t>(mb.offsets.size()), m = mb.m, n = mb.n, k = mb.k;
  const std::string key = "matmul b" + std::to_string(batch) + " m" + std::to_string(m) + " n" +
                          std::to_string(n) + " k" + std::to_string(k) + (mb.ta ? " ta" : "") +
                          (mb.tb ? " tb" : "") + (accumulate ? " acc" : "") + " threads " +
                          std::to_string(dnnl_threads());
  auto p = du::cached_as<BatchedMatmul>(key, [&] {
    auto r = std::make_shared<BatchedMatmul>();
    r->a = du::plain_desc({batch, m, k}, mb.ta ? ir::Shape{m * k, 1, m} : ir::Shape{m * k, k, 1});
    r->b = du::plain_desc({batch, k, n}, mb.tb ? ir::Shape{k * n, 1, k} : ir::Shape{k * n, n, 1});
    r->y = du::plain_desc({batch, m, n});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(r->a, r->b, r->y),
                                    du::matmul_attr(1.0f, accumulate ? 1.0f : 0.0f), du::engine());
    r->scratch = pd.scratchpad_desc();
    r->prim = dnnl::matmul(pd);
    return r;
  });
  auto& eng = du::engine();
  auto& s = du::stream();
  p->prim.execute(s, {{DNNL_ARG_SRC, dnnl::memory(p->a, eng, const_cast<float*>(a))},
                      {DNNL_ARG_WEIGHTS, dnnl::memory(p->b, eng, const_cast<float*>(b))},
                      {DNNL_ARG_DST, dnnl::memory(p->y, eng, y)},
                      {DNNL_ARG_SCRATCHPAD, dnnl_util::scratchpad(p->scratch)}});
  s.wait();
  if (fault_injected(KernelPath::kDnnlMatmul)) inject_error(y, 1);
  return true;
}

// Y = beta * C broadcast, plus Y when `add`: C is (), (N), (1|M, 1|N); a
// size-1 axis has stride 0.
void add_broadcast_c(const ir::Tensor& c, float beta, bool add, int64_t m, int64_t n, float* yd) {
  const ir::Shape& cs = c.shape();
  int64_t c_rows = cs.size() == 2 ? cs[0] : 1;
  int64_t c_cols = cs.empty() ? 1 : cs.back();
  int64_t row_stride = c_rows == 1 ? 0 : c_cols, col_stride = c_cols == 1 ? 0 : 1;
  const float* cd = c.data<float>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float bc = beta * cd[i * row_stride + j * col_stride];
      yd[i * n + j] = add ? yd[i * n + j] + bc : bc;  // y may hold garbage when not adding
    }
}

void gemm_product(KernelContext& ctx) {
  const ir::Tensor& a = ctx.in(0);  // (M, K) or (K, M)
  const ir::Tensor& b = ctx.in(1);  // (K, N) or (N, K)
  ir::Tensor& y = ctx.out(0);       // (M, N)
  bool ta = ctx.n().attr_int("transA", 0) != 0;
  bool tb = ctx.n().attr_int("transB", 0) != 0;
  float alpha = ctx.n().attr_float("alpha", 1.0f);
  float beta = ctx.n().attr_float("beta", 1.0f);
  int64_t m = y.shape()[0], n = y.shape()[1];
  int64_t k = ta ? a.shape()[0] : a.shape()[1];
  float* yd = y.data<float>();
  bool acc = ctx.accumulates(0);  // add to a running sum
  const ir::Tensor* c = ctx.has_in(2) && beta != 0.0f ? &ctx.in(2) : nullptr;
  if (ctx.in_is_value(1)) {
    // A weight: oneDNN's matmul, with a bias row (Linear's) in its epilogue.
    WeightGemm g;
    g.m = m;
    g.n = n;
    g.k = k;
    g.lda = a.shape()[1];
    g.ldw = b.shape()[1];
    g.ta = ta;
    g.tw = tb;
    g.accumulate = acc;
    g.alpha = alpha;
    const float* bias = nullptr;
    std::vector<float> scaled;
    if (c && alpha == 1.0f && c->numel() == n && c->shape().size() <= 2 &&
        (c->shape().size() < 2 || c->shape()[0] == 1)) {
      bias = c->data<float>();
      if (beta != 1.0f) {
        scaled.assign(bias, bias + n);
        for (float& v : scaled) v *= beta;
        bias = scaled.data();
      }
      g.bias = true;
    } else if (c) {
      add_broadcast_c(*c, beta, acc, m, n, yd);
      g.accumulate = acc = true;
      c = nullptr;
    }
    if (sgemm_weight(g, a.data<float>(), b.data<float>(), bias, yd)) return;
  }
  if (c) {
    add_broadcast_c(*c, beta, acc, m, n, yd);
    acc = true;
  }
  // A weight gradient dY^T X over many rows with a wide side (a 1024-wide
  // layer): brgemm reads the transposed A better than OpenBLAS there. In a
  // transformer step (one thread) 3.4 -> 3.2 ms a 1024 x 256 x 1024
  // product, ~3 ms a step in all; 768 x 256 x 1024 went 2.36 -> 2.45, so
  // narrower ones stay; accumulating ones stayed level and stay too.
  if (ta && !acc && std::max(m, n) >= 1024 && m * n * k > kSmallGemm) {
    WeightGemm g;
    g.m = m;
    g.n = n;
    g.k = k;
    g.lda = a.shape()[1];
    g.ldw = b.shape()[1];
    g.ta = ta;
    g.tw = tb;
    g.alpha = alpha;
    if (sgemm_weight(g, a.data<float>(), b.data<float>(), nullptr, yd)) return;
  }
  sgemm(ta, tb, m, n, k, alpha, a.data<float>(), a.shape()[1], b.data<float>(), b.shape()[1],
        acc ? 1.0f : 0.0f, yd);
}

// The product, then the fused ReLU (ir/passes/fusion.h) over Y.
void gemm(KernelContext& ctx) {
  gemm_product(ctx);
  gemm_relu_epilogue(ctx);
}

void matmul(KernelContext& ctx) {
  const ir::Tensor& a = ctx.in(0);  // (batch_a..., M, K) or (K); (batch_a..., K, M) with transA
  const ir::Tensor& b = ctx.in(1);  // (batch_b..., K, N) or (K); (batch_b..., N, K) with transB
  ir::Tensor& y = ctx.out(0);       // (batch..., M, N) without the axes a 1-D operand lacks
  const float* ad = a.data<float>();
  const float* bd = b.data<float>();
  float* yd = y.data<float>();
  const auto mb = device::matmul_batches(a.shape(), b.shape(), ctx.n().attr_int("transA", 0) != 0,
                                         ctx.n().attr_int("transB", 0) != 0);
  const int64_t m = mb.m, n = mb.n, k = mb.k;
  const float acc = ctx.accumulates(0) ? 1.0f : 0.0f;  // 1 adds to a running sum
  if (ir::numel(mb.batch_b) == 1 && !mb.ta) {
    // One B matrix: A's matrices stack into one of rows.
    const int64_t rows = ir::numel(mb.batch_a) * m;
    WeightGemm g;
    g.m = rows;
    g.n = n;
    g.k = g.lda = k;
    g.ldw = mb.ldb;
    g.tw = mb.tb;
    g.accumulate = acc != 0.0f;
    if (ctx.in_is_value(1) && sgemm_weight(g, ad, bd, nullptr, yd)) return;
    sgemm(false, mb.tb, rows, n, k, 1.0f, ad, k, bd, mb.ldb, acc, yd);
    return;
  }
  if (m * n * k <= kSmallGemm && batched_on_dnnl(mb, ad, bd, yd, acc != 0.0f)) return;
  for (size_t t = 0; t < mb.offsets.size(); ++t)
    sgemm(mb.ta, mb.tb, m, n, k, 1.0f, ad + mb.offsets[t].first, mb.lda, bd + mb.offsets[t].second,
          mb.ldb, acc, yd + static_cast<int64_t>(t) * m * n);
}

}  // namespace

CpuKernel kernel_Gemm() {
  return {gemm, {ir::DType::kF32}, 0};
}
CpuKernel kernel_MatMul() {
  return {matmul, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
