// Gemm and MatMul under bf16 mixed precision (bf16.h): both operands
// converted to bf16 (bf16_copy; a weight once per update), one oneDNN matmul
// primitive per shape with fp32 accumulation into the fp32 output, which is
// then rounded to bf16. Transposed operands are strides, not copies.
#include <cstring>
#include <unordered_map>
#include <vector>

#include "executor/cpu/kernels/bf16.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/cpu/kernels/dnnl_util.h"
#include "executor/cpu/kernels/sgemm.h"
#include "executor/device/bf16.h"
#include "executor/device/matmul_batches.h"

namespace pipetrain::exec::cpu {

namespace {

using dnnl::memory;
namespace du = dnnl_util;

// Y (batch, m, n) = alpha * A B (+ Y when `sum`, + a bias row when `bias`),
// A and B bf16 with element strides (batch, row, column) that express
// transposition and broadcasting; the bias is f32 (n).
struct Product {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  ir::Shape a_strides, b_strides;
  float alpha = 1.0f;
  bool sum = false, bias = false;

  std::string key() const {
    uint32_t alpha_bits;
    std::memcpy(&alpha_bits, &alpha, sizeof alpha_bits);
    return "bf16 matmul b" + std::to_string(batch) + " m" + std::to_string(m) + " n" +
           std::to_string(n) + " k" + std::to_string(k) + " sa" + du::key_of(a_strides) + " sb" +
           du::key_of(b_strides) + " alpha" + std::to_string(alpha_bits) + (sum ? " sum" : "") +
           (bias ? " bias" : "") + " threads " + std::to_string(dnnl_threads());
  }
};

struct MatmulPrimitive {
  dnnl::matmul prim;
  memory::desc a, b, y, bias, scratch;
};

memory::desc bf16_desc(const ir::Shape& dims, const ir::Shape& strides) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::bf16,
                      memory::dims(strides.begin(), strides.end()));
}

// False when oneDNN has no matmul for the case (nothing was written).
bool run_product(const Product& p, const uint16_t* a, const uint16_t* b, float* y,
                 const float* bias = nullptr) {
  auto prim = du::cached_as<MatmulPrimitive>(p.key(), [&] {
    auto r = std::make_shared<MatmulPrimitive>();
    r->a = bf16_desc({p.batch, p.m, p.k}, p.a_strides);
    r->b = bf16_desc({p.batch, p.k, p.n}, p.b_strides);
    r->y = du::plain_desc({p.batch, p.m, p.n});
    if (p.bias) r->bias = du::plain_desc({1, 1, p.n});
    const dnnl::primitive_attr attr = du::matmul_attr(p.alpha, p.sum ? 1.0f : 0.0f);
    try {
      dnnl::matmul::primitive_desc pd(p.bias ? dnnl::matmul::desc(r->a, r->b, r->bias, r->y)
                                             : dnnl::matmul::desc(r->a, r->b, r->y),
                                      attr, du::engine());
      r->scratch = pd.scratchpad_desc();
      r->prim = dnnl::matmul(pd);
    } catch (const dnnl::error&) {
      return std::shared_ptr<MatmulPrimitive>();
    }
    return r;
  });
  if (!prim) return false;
  auto& eng = du::engine();
  auto& s = du::stream();
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, memory(prim->a, eng, const_cast<uint16_t*>(a))},
      {DNNL_ARG_WEIGHTS, memory(prim->b, eng, const_cast<uint16_t*>(b))},
      {DNNL_ARG_DST, memory(prim->y, eng, y)},
      {DNNL_ARG_SCRATCHPAD, du::scratchpad(prim->scratch)}};
  if (p.bias) args[DNNL_ARG_BIAS] = memory(prim->bias, eng, const_cast<float*>(bias));
  prim->prim.execute(s, args);
  s.wait();
  return true;
}

// Strides of one (rows, cols) matrix stored with row length `ld`, read
// transposed or not, in a batch `step` elements apart.
ir::Shape matrix_strides(bool transposed, int64_t ld, int64_t step) {
  return transposed ? ir::Shape{step, 1, ld} : ir::Shape{step, ld, 1};
}

const uint16_t* bf16_data(const memory& m) {
  return static_cast<const uint16_t*>(m.get_data_handle());
}

}  // namespace

bool gemm_on_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  bool a_is_value, const float* b, int64_t ldb, bool b_is_value, uint64_t version,
                  float* y) {
  Product p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a_strides = matrix_strides(ta, lda, m * k);
  p.b_strides = matrix_strides(tb, ldb, k * n);
  const memory a16 = bf16_copy(a, m * k, a_is_value, version);
  const memory b16 = bf16_copy(b, k * n, b_is_value, version);
  return run_product(p, bf16_data(a16), bf16_data(b16), y);
}

namespace {

bool gemm_bf16(KernelContext& ctx) {
  const ir::Tensor& a = ctx.in(0);  // (M, K) or (K, M)
  const ir::Tensor& b = ctx.in(1);  // (K, N) or (N, K)
  ir::Tensor& y = ctx.out(0);       // (M, N)
  const bool ta = ctx.n().attr_int("transA", 0) != 0, tb = ctx.n().attr_int("transB", 0) != 0;
  const float beta = ctx.n().attr_float("beta", 1.0f);
  Product p;
  p.m = y.shape()[0];
  p.n = y.shape()[1];
  p.k = ta ? a.shape()[0] : a.shape()[1];
  if (p.m * p.n * p.k == 0) return false;  // the fp32 kernel's empty sums
  p.alpha = ctx.n().attr_float("alpha", 1.0f);
  p.a_strides = matrix_strides(ta, a.shape()[1], p.m * p.k);
  p.b_strides = matrix_strides(tb, b.shape()[1], p.k * p.n);
  float* yd = y.data<float>();
  std::vector<float> bias;
  const bool row_bias = ctx.has_in(2) && beta != 0.0f && p.alpha == 1.0f &&
                        ctx.in(2).numel() == p.n && ctx.in(2).shape().size() <= 2 &&
                        (ctx.in(2).shape().size() < 2 || ctx.in(2).shape()[0] == 1);
  if (row_bias) {
    // A bias row (Linear's): oneDNN adds beta * round(C) as it stores Y.
    const float* cd = ctx.in(2).data<float>();
    bias.resize(static_cast<size_t>(p.n));
    for (int64_t j = 0; j < p.n; ++j) bias[j] = beta * device::round_bf16(cd[j]);
    p.bias = true;
  } else if (ctx.has_in(2) && beta != 0.0f) {
    // Y = beta * round(C) broadcast (C is (), (N), (1|M, 1|N)), the product added.
    const ir::Tensor& c = ctx.in(2);
    const ir::Shape& cs = c.shape();
    const int64_t c_rows = cs.size() == 2 ? cs[0] : 1, c_cols = cs.empty() ? 1 : cs.back();
    const int64_t row_stride = c_rows == 1 ? 0 : c_cols, col_stride = c_cols == 1 ? 0 : 1;
    const float* cd = c.data<float>();
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j)
        yd[i * p.n + j] = beta * device::round_bf16(cd[i * row_stride + j * col_stride]);
    p.sum = true;
  }
  const memory a16 = bf16_copy(a.data<float>(), a.numel(), ctx.in_is_value(0), ctx.values_version);
  const memory b16 = bf16_copy(b.data<float>(), b.numel(), ctx.in_is_value(1), ctx.values_version);
  if (!run_product(p, bf16_data(a16), bf16_data(b16), yd, bias.data())) return false;
  round_bf16_in_place(yd, y.numel());
  return true;
}

bool matmul_bf16(KernelContext& ctx) {
  const ir::Tensor& a = ctx.in(0);
  const ir::Tensor& b = ctx.in(1);
  ir::Tensor& y = ctx.out(0);
  const auto mb = device::matmul_batches(a.shape(), b.shape(), ctx.n().attr_int("transA", 0) != 0,
                                         ctx.n().attr_int("transB", 0) != 0);
  if (mb.m * mb.n * mb.k == 0 || mb.offsets.empty()) return false;
  const memory a16 = bf16_copy(a.data<float>(), a.numel(), ctx.in_is_value(0), ctx.values_version);
  const memory b16 = bf16_copy(b.data<float>(), b.numel(), ctx.in_is_value(1), ctx.values_version);
  const uint16_t *ad = bf16_data(a16), *bd = bf16_data(b16);
  float* yd = y.data<float>();
  Product p;
  p.m = mb.m;
  p.n = mb.n;
  p.k = mb.k;
  bool ok = true;
  if (ir::numel(mb.batch_b) == 1 && !mb.ta) {
    // One B matrix: A's matrices stack into one of rows.
    p.m = ir::numel(mb.batch_a) * mb.m;
    p.a_strides = matrix_strides(false, mb.k, p.m * mb.k);
    p.b_strides = matrix_strides(mb.tb, mb.ldb, mb.k * mb.n);
    ok = run_product(p, ad, bd, yd);
  } else if (mb.batch_a == mb.batch_b) {
    p.batch = static_cast<int64_t>(mb.offsets.size());
    p.a_strides = matrix_strides(mb.ta, mb.lda, mb.m * mb.k);
    p.b_strides = matrix_strides(mb.tb, mb.ldb, mb.k * mb.n);
    ok = run_product(p, ad, bd, yd);
  } else {  // broadcast batches: one product per output matrix
    p.a_strides = matrix_strides(mb.ta, mb.lda, mb.m * mb.k);
    p.b_strides = matrix_strides(mb.tb, mb.ldb, mb.k * mb.n);
    for (size_t t = 0; t < mb.offsets.size() && ok; ++t)
      ok = run_product(p, ad + mb.offsets[t].first, bd + mb.offsets[t].second,
                       yd + static_cast<int64_t>(t) * mb.m * mb.n);
  }
  if (!ok) return false;
  round_bf16_in_place(yd, y.numel());
  return true;
}

}  // namespace

CpuKernel kernel_bf16_Gemm() {
  return {[](KernelContext& ctx) {
            // ReLU after the rounding, as the unfused bf16 Relu node saw it
            // (the two commute); kernel_Gemm() applies it itself.
            if (gemm_bf16(ctx))
              gemm_relu_epilogue(ctx);
            else
              run_on_rounded_copies(ctx, kernel_Gemm().fn);
          },
          {ir::DType::kF32},
          0};
}

CpuKernel kernel_bf16_MatMul() {
  return {[](KernelContext& ctx) {
            if (!matmul_bf16(ctx)) run_on_rounded_copies(ctx, kernel_MatMul().fn);
          },
          {ir::DType::kF32},
          0};
}

}  // namespace pipetrain::exec::cpu
