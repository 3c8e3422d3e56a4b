#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>

#include "executor/cpu/kernels/blas_core.h"
#include "executor/cpu/kernels/sgemm.h"
#include "tests/executor/nn_test_util.h"

namespace pipetrain::test {
namespace {

// OpenBLAS 0.3.21 falls back to its SSE3 kernels on CPU models it does not
// know (3.7x slower GEMMs on the Emerald Rapids VMs); the GEMMs then run on
// oneDNN's sgemm (blas_core.h), as the products below do there.
TEST(BlasCore, NoGemmOnTheSse3FallbackOnACpuWithAvx) {
  if (std::getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE chooses";
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx")) GTEST_SKIP() << "no AVX: Prescott is the right choice";
  EXPECT_EQ(std::string(exec::cpu::blas_core()) == "Prescott", exec::cpu::openblas_fell_back());
}

using ir::Shape;
using ir::Tensor;

// Element (i, j) of a matrix stored row-major with `cols` columns, optionally transposed.
float at2(const Tensor& t, bool trans, int64_t i, int64_t j) {
  int64_t cols = t.shape()[1];
  return t.data<float>()[trans ? j * cols + i : i * cols + j];
}

TEST(Gemm, HandComputed) {
  Tensor a = Tensor::from_f32({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_f32({5, 6, 7, 8}, {2, 2});
  expect_close(run_op("Gemm", {in(a), in(b)})[0], {19, 22, 43, 50});
  // Y = 0.5 A^T B + 2 C with C (2) broadcast over rows: A^T B = [[26, 30], [38, 44]].
  Tensor c = Tensor::from_f32({1, -1}, {2});
  auto y = run_op("Gemm", {in(a), in(b), in(c)},
                  {{"transA", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}})[0];
  expect_close(y, {15, 13, 21, 20});
}

TEST(Gemm, AllTransposesAndBiasShapesMatchNaive) {
  // A small product (dnnl_sgemm) with every bias shape, and one above
  // linalg.cc's kSmallGemm (cblas_sgemm) with a row bias; with B a graph
  // value (a weight), both on oneDNN's matmul where the CPU has brgemm (at
  // alpha 1 a bias row, beta times C, goes in its epilogue).
  for (const auto& [m, k, n, large] :
       {std::tuple<int64_t, int64_t, int64_t, bool>{3, 5, 4, false}, {130, 170, 200, true}})
    for (bool weight : {false, true})
      for (float alpha : {0.75f, 1.0f})  // 1: a weight's bias row goes in the epilogue
        for (int ta = 0; ta < 2; ++ta)
          for (int tb = 0; tb < 2; ++tb)
            for (const Shape& cs :
                 {Shape{}, Shape{n}, Shape{1, n}, Shape{m, 1}, Shape{m, n}, Shape{0}}) {
              if (large && cs != Shape{n}) continue;
              bool no_c = cs == Shape{0};
              Tensor a = wave(ta ? Shape{k, m} : Shape{m, k}, 0.1);
              Tensor b = wave(tb ? Shape{n, k} : Shape{k, n}, 0.7);
              Tensor c = no_c ? Tensor() : wave(cs, 1.3);
              std::vector<OpInput> ins = {in(a), weight ? constant(b) : in(b)};
              if (!no_c) ins.push_back(in(c));
              auto y = run_op("Gemm", ins,
                              {{"transA", int64_t{ta}},
                               {"transB", int64_t{tb}},
                               {"alpha", alpha},
                               {"beta", -1.25f}})[0];
              Tensor want(ir::DType::kF32, {m, n});
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j) {
                  double s = 0;
                  for (int64_t p = 0; p < k; ++p) s += at2(a, ta, i, p) * at2(b, tb, p, j);
                  double cv = 0;
                  if (!no_c) {
                    int64_t ci = cs.size() == 2 && cs[0] != 1 ? i : 0;
                    int64_t cj = !cs.empty() && cs.back() != 1 ? j : 0;
                    cv = c.data<float>()[ci * (cs.empty() ? 1 : cs.back()) + cj];
                  }
                  want.data<float>()[i * n + j] = static_cast<float>(alpha * s - 1.25 * cv);
                }
              SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb) +
                           " C " + (no_c ? "absent" : ir::shape_str(cs)) +
                           (weight ? " B a weight" : "") + " alpha " + std::to_string(alpha));
              expect_close(y, want);
            }
}

// Products with a weight on oneDNN's matmul (weight_gemm.cc): bias, alpha
// and accumulation into Y hold for every transpose. The last two shapes are
// a microbatch's few rows against a wide weight, which it computes swapped
// (Y^T = W A^T, transposed back; 21 rows: a part of eight rows left over).
TEST(Gemm, WeightProductsMatchNaive) {
  for (const auto& [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{3, 50, 40},
                                {40, 64, 48},
                                {600, 70, 30},
                                {32, 256, 512},
                                {21, 300, 260}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tw = 0; tw < 2; ++tw)
        for (int variant = 0; variant < 3; ++variant) {  // plain, bias + alpha 1, accumulate
          const bool bias = variant == 1, accumulate = variant == 2;
          const float alpha = bias ? 1.0f : 0.5f;
          Tensor a = wave(ta ? Shape{k, m} : Shape{m, k}, 0.1);
          Tensor w = wave(tw ? Shape{n, k} : Shape{k, n}, 0.7);
          Tensor b = wave({n}, 1.3), y = wave({m, n}, 2.1);
          Tensor want(ir::DType::kF32, {m, n});
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double s = 0;
              for (int64_t p = 0; p < k; ++p) s += at2(a, ta, i, p) * at2(w, tw, p, j);
              s = alpha * s + (bias ? b.data<float>()[j] : 0.0) +
                  (accumulate ? y.data<float>()[i * n + j] : 0.0);
              want.data<float>()[i * n + j] = static_cast<float>(s);
            }
          exec::cpu::WeightGemm g;
          g.m = m;
          g.n = n;
          g.k = k;
          g.lda = a.shape()[1];
          g.ldw = w.shape()[1];
          g.ta = ta != 0;
          g.tw = tw != 0;
          g.bias = bias;
          g.accumulate = accumulate;
          g.alpha = alpha;
          SCOPED_TRACE(ir::shape_str({m, k, n}) + " ta " + std::to_string(ta) + " tw " +
                       std::to_string(tw) + " variant " + std::to_string(variant));
          if (!exec::cpu::sgemm_weight(g, a.data<float>(), w.data<float>(), b.data<float>(),
                                       y.data<float>()))
            GTEST_SKIP() << "no brgemm matmul on this CPU: OpenBLAS runs these";
          expect_close(y, want);
        }
}

TEST(Gemm, ShapeErrorsNameTheShapes) {
  try {
    run_op("Gemm", {in(Tensor(ir::DType::kF32, {2, 3})), in(Tensor(ir::DType::kF32, {4, 5}))});
    FAIL() << "expected ModelError";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 3)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      run_op("Gemm", {in(Tensor(ir::DType::kF32, {2, 3})), in(Tensor(ir::DType::kF32, {3, 4})),
                      in(Tensor(ir::DType::kF32, {3}))}),
      ModelError);
}

// numpy matmul by definition: promote 1-D operands, broadcast batch axes.
Tensor naive_matmul(const Tensor& a, const Tensor& b, const Shape& y_shape) {
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  size_t rank = std::max(as.size(), bs.size());
  while (as.size() < rank) as.insert(as.begin(), 1);
  while (bs.size() < rank) bs.insert(bs.begin(), 1);
  Shape batch(rank - 2);
  for (size_t i = 0; i + 2 < rank; ++i) batch[i] = std::max(as[i], bs[i]);
  Tensor y(ir::DType::kF32, y_shape);
  int64_t count = ir::numel(batch);
  for (int64_t t = 0; t < count; ++t) {
    int64_t rem = t, oa = 0, ob = 0, sa = m * k, sb = k * n;
    for (size_t i = batch.size(); i-- > 0;) {
      int64_t idx = rem % batch[i];
      rem /= batch[i];
      oa += (as[i] == 1 ? 0 : idx) * sa;
      ob += (bs[i] == 1 ? 0 : idx) * sb;
      sa *= as[i];
      sb *= bs[i];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += a.data<float>()[oa + i * k + p] * b.data<float>()[ob + p * n + j];
        y.data<float>()[(t * m + i) * n + j] = static_cast<float>(s);
      }
  }
  return y;
}

TEST(MatMul, NumpySemantics) {
  struct Case {
    Shape a, b, y;
  };
  for (const Case& c : std::vector<Case>{{{5}, {5}, {}},
                                         {{4}, {2, 4, 3}, {2, 3}},
                                         {{2, 3, 4}, {4}, {2, 3}},
                                         {{2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6}},
                                         {{3, 4}, {2, 2, 4, 5}, {2, 2, 3, 5}},
                                         {{2, 3, 5, 4}, {4, 6}, {2, 3, 5, 6}},
                                         {{2, 3, 4}, {1, 4, 2}, {2, 3, 2}},
                                         // above kSmallGemm: the cblas_sgemm path
                                         {{2, 96, 160}, {160, 300}, {2, 96, 300}},
                                         {{2, 96, 160}, {2, 160, 300}, {2, 96, 300}}}) {
    Tensor a = wave(c.a, 0.2), b = wave(c.b, 0.9);
    auto y = run_op("MatMul", {in(a), in(b)})[0];
    SCOPED_TRACE(ir::shape_str(c.a) + " x " + ir::shape_str(c.b));
    EXPECT_EQ(y.shape(), c.y);
    expect_close(y, naive_matmul(a, b, c.y));
  }
}

// t with its last two axes swapped (a copy).
Tensor swap_last2(const Tensor& t) {
  Shape s = t.shape();
  const int64_t r = s[s.size() - 2], c = s.back();
  std::swap(s[s.size() - 2], s.back());
  Tensor y(ir::DType::kF32, s);
  for (int64_t m = 0; m < t.numel() / (r * c); ++m)
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j)
        y.data<float>()[m * r * c + j * r + i] = t.data<float>()[m * r * c + i * c + j];
  return y;
}

// transA / transB read an operand stored with its last two axes swapped: the
// batch loop, the broadcast batch, the stacked-rows path (one B matrix) and
// cblas_sgemm's size.
TEST(MatMul, TransposedOperandsEqualTheProductOfTheTransposes) {
  struct Case {
    Shape a, b, y;  // the logical operands, as numpy's matmul takes them
  };
  for (const Case& c : std::vector<Case>{{{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},
                                         {{2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6}},
                                         {{2, 3, 5, 4}, {4, 6}, {2, 3, 5, 6}},
                                         {{2, 96, 160}, {2, 160, 300}, {2, 96, 300}}})
    for (int64_t ta : {0, 1})
      for (int64_t tb : {0, 1}) {
        Tensor a = wave(c.a, 0.2), b = wave(c.b, 0.9);
        Tensor sa = ta ? swap_last2(a) : a, sb = tb ? swap_last2(b) : b;
        auto y = run_op("MatMul", {in(sa), in(sb)}, {{"transA", ta}, {"transB", tb}})[0];
        SCOPED_TRACE(ir::shape_str(c.a) + " x " + ir::shape_str(c.b) + " transA " +
                     std::to_string(ta) + " transB " + std::to_string(tb));
        EXPECT_EQ(y.shape(), c.y);
        expect_close(y, naive_matmul(a, b, c.y));
      }
  EXPECT_THROW(
      run_op("MatMul", {in(wave({4}, 0.1)), in(wave({4, 2}, 0.1))}, {{"transA", int64_t{1}}}),
      ModelError);
}

TEST(MatMul, MismatchesAreModelErrors) {
  EXPECT_THROW(
      run_op("MatMul", {in(Tensor(ir::DType::kF32, {2, 3})), in(Tensor(ir::DType::kF32, {4, 2}))}),
      ModelError);
  EXPECT_THROW(run_op("MatMul", {in(Tensor(ir::DType::kF32, {2, 2, 3})),
                                 in(Tensor(ir::DType::kF32, {3, 3, 2}))}),
               ModelError);
}

}  // namespace
}  // namespace pipetrain::test
