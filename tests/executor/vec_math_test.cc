// exp_f32 / tanh_f32 / erfc_f32 / erf_f32 against libm in double over dense sweeps.
#include "executor/cpu/kernels/vec_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pipetrain::exec::cpu {
namespace {

/// |got - want| in units of the f32 spacing at want.
double ulps(float got, double want) {
  const double spacing = std::max(std::nextafter(std::fabs(static_cast<float>(want)), INFINITY) -
                                      std::fabs(static_cast<float>(want)),
                                  static_cast<float>(std::numeric_limits<float>::denorm_min()));
  return std::fabs(static_cast<double>(got) - want) / spacing;
}

TEST(VecMath, ExpWithinTwoUlpOverTheNormalRange) {
  double worst = 0;
  float worst_x = 0;
  for (float x = -87.0f; x <= 88.7f; x += 0.0007f) {
    const double u = ulps(exp_f32(x), std::exp(static_cast<double>(x)));
    if (u > worst) worst = u, worst_x = x;
  }
  EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
}

TEST(VecMath, ExpEdgeCases) {
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(89.0f), INFINITY);
  EXPECT_EQ(exp_f32(INFINITY), INFINITY);
  EXPECT_EQ(exp_f32(-INFINITY), 0.0f);
  EXPECT_EQ(exp_f32(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(exp_f32(NAN)));
  // Subnormal results keep their magnitude.
  EXPECT_NEAR(exp_f32(-100.0f), std::exp(-100.0), 2e-45);
  EXPECT_GT(exp_f32(88.72f), 3.3e38f);
}

TEST(VecMath, TanhWithinFewUlp) {
  double worst = 0;
  float worst_x = 0;
  for (float x = -10.0f; x <= 10.0f; x += 0.00031f) {
    const double u = ulps(tanh_f32(x), std::tanh(static_cast<double>(x)));
    if (u > worst) worst = u, worst_x = x;
  }
  EXPECT_LE(worst, 3.0) << "at x = " << worst_x;
  EXPECT_EQ(tanh_f32(1e-20f), 1e-20f);
  EXPECT_EQ(tanh_f32(50.0f), 1.0f);
  EXPECT_EQ(tanh_f32(-50.0f), -1.0f);
  EXPECT_TRUE(std::isnan(tanh_f32(NAN)));
}

TEST(VecMath, ErfcRelativeErrorBelow4e6) {
  double worst = 0;
  float worst_x = 0;
  for (float x = -4.0f; x <= 4.0f; x += 0.00013f) {
    const double want = std::erfc(static_cast<double>(x));
    const double rel = std::fabs(erfc_f32(x) - want) / want;
    if (rel > worst) worst = rel, worst_x = x;
  }
  EXPECT_LE(worst, 4e-6) << "at x = " << worst_x;
  EXPECT_EQ(erfc_f32(INFINITY), 0.0f);
  EXPECT_EQ(erfc_f32(-INFINITY), 2.0f);
  EXPECT_TRUE(std::isnan(erfc_f32(NAN)));
}

TEST(VecMath, ErfWithinSevenUlp) {
  // ulp of the f32 result, measured against libm in double.
  double worst = 0;
  float worst_x = 0;
  for (float x = -5.0f; x <= 5.0f; x += 0.00011f) {
    const double want = std::erf(static_cast<double>(x));
    const float want_f = static_cast<float>(want);
    const double ulp = std::nextafter(std::fabs(want_f), INFINITY) - std::fabs(want_f);
    const double err = std::fabs(erf_f32(x) - want) / ulp;
    if (err > worst) worst = err, worst_x = x;
  }
  EXPECT_LE(worst, 7.0) << "at x = " << worst_x;
  EXPECT_EQ(erf_f32(0.0f), 0.0f);
  EXPECT_EQ(erf_f32(1e-30f), static_cast<float>(1e-30 * 1.1283791670955126));
  EXPECT_EQ(erf_f32(INFINITY), 1.0f);
  EXPECT_EQ(erf_f32(-INFINITY), -1.0f);
  EXPECT_TRUE(std::isnan(erf_f32(NAN)));
}

}  // namespace
}  // namespace pipetrain::exec::cpu
