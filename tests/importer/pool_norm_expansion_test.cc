// LpPool, GroupNormalization and Det (3 x 3 and 4 x 4), expanded at import,
// against naive loops in double (ONNX 1.12's node tests have none of these
// forms; PyTorch exports none of them as these ops).
#include <gtest/gtest.h>

#include <cmath>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

using test::filled;

ir::Tensor run1(const std::string& text, std::map<std::string, ir::Tensor> feeds) {
  ir::Graph g = test::import_text(text);
  auto backend = exec::make_cpu_backend();
  return exec::ForwardRunner(g, *backend).run(feeds).at("y");
}

// A 3x3 window, stride 2, one pixel of zero padding on each side of a 5x5 plane.
TEST(PoolNormExpansion, LpPoolMatchesTheWindowNorm) {
  const ir::Tensor x = filled({1, 2, 5, 5}, 3);
  for (int64_t p : {1, 2, 3}) {
    const ir::Tensor y = run1(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 2, 5, 5] x) => (float[1, 2, 3, 3] y)
{
  y = LpPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], p = )" +
                                  std::to_string(p) + R"(> (x)
}
)",
                              {{"x", x}});
    ASSERT_EQ(y.shape(), (ir::Shape{1, 2, 3, 3}));
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t oi = 0; oi < 3; ++oi)
        for (int64_t oj = 0; oj < 3; ++oj) {
          double sum = 0;
          for (int64_t di = 0; di < 3; ++di)
            for (int64_t dj = 0; dj < 3; ++dj) {
              const int64_t i = oi * 2 - 1 + di, j = oj * 2 - 1 + dj;
              if (i < 0 || i >= 5 || j < 0 || j >= 5) continue;
              sum += std::pow(std::abs(x.data<float>()[(c * 5 + i) * 5 + j]), p);
            }
          EXPECT_NEAR(y.data<float>()[(c * 3 + oi) * 3 + oj], std::pow(sum, 1.0 / p), 2e-6)
              << "p " << p << " c " << c << " at " << oi << "," << oj;
        }
  }
}

TEST(PoolNormExpansion, GroupNormalizationMatchesPerGroupStatistics) {
  const int64_t n = 2, c = 6, hw = 4, groups = 3;
  const ir::Tensor x = filled({n, c, 2, 2}, 5), scale = filled({c}, 6), bias = filled({c}, 7);
  const ir::Tensor y = run1(R"(
<ir_version: 8, opset_import: ["" : 18]>
g (float[2, 6, 2, 2] x, float[6] s, float[6] b) => (float[2, 6, 2, 2] y)
{
  y = GroupNormalization <num_groups = 3, epsilon = 0.001> (x, s, b)
}
)",
                            {{"x", x}, {"s", scale}, {"b", bias}});
  const int64_t per = c / groups * hw;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t gr = 0; gr < groups; ++gr) {
      const float* v = x.data<float>() + (i * c + gr * (c / groups)) * hw;
      double mean = 0, var = 0;
      for (int64_t k = 0; k < per; ++k) mean += v[k];
      mean /= per;
      for (int64_t k = 0; k < per; ++k) var += (v[k] - mean) * (v[k] - mean);
      var /= per;
      for (int64_t k = 0; k < per; ++k) {
        const int64_t ch = gr * (c / groups) + k / hw;
        const double want = (v[k] - mean) / std::sqrt(var + 1e-3) * scale.data<float>()[ch] +
                            bias.data<float>()[ch];
        EXPECT_NEAR(y.data<float>()[(i * c + gr * (c / groups)) * hw + k], want, 2e-6)
            << "n " << i << " group " << gr << " k " << k;
      }
    }
}

/// The determinant by Gaussian elimination with partial pivoting, in double.
double lu_det(std::vector<double> a, int64_t m) {
  double det = 1;
  for (int64_t k = 0; k < m; ++k) {
    int64_t p = k;
    for (int64_t i = k + 1; i < m; ++i)
      if (std::abs(a[i * m + k]) > std::abs(a[p * m + k])) p = i;
    if (p != k) {
      for (int64_t j = 0; j < m; ++j) std::swap(a[k * m + j], a[p * m + j]);
      det = -det;
    }
    det *= a[k * m + k];
    for (int64_t i = k + 1; i < m; ++i) {
      const double f = a[i * m + k] / a[k * m + k];
      for (int64_t j = k; j < m; ++j) a[i * m + j] -= f * a[k * m + j];
    }
  }
  return det;
}

TEST(PoolNormExpansion, DetMatchesEliminationForEachMatrix) {
  for (int64_t m : {3, 4}) {
    const ir::Tensor x = filled({2, m, m}, static_cast<uint32_t>(m));
    const std::string dims = "2, " + std::to_string(m) + ", " + std::to_string(m);
    const ir::Tensor y = run1(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[)" + dims + R"(] x) => (float[2] y)
{
  y = Det(x)
}
)",
                              {{"x", x}});
    for (int64_t b = 0; b < 2; ++b) {
      std::vector<double> a(x.data<float>() + b * m * m, x.data<float>() + (b + 1) * m * m);
      EXPECT_NEAR(y.data<float>()[b], lu_det(a, m), 1e-6) << m << "x" << m << " matrix " << b;
    }
  }
}

}  // namespace
}  // namespace pipetrain
