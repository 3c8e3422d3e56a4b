#include <gtest/gtest.h>

#include <cmath>

#include "tests/executor/nn_test_util.h"

namespace pipetrain::test {
namespace {

using ir::Shape;
using ir::Tensor;

TEST(BatchNormalization, InferenceUsesRunningStatistics) {
  Tensor x = wave({2, 3, 2, 2});
  Tensor scale = Tensor::from_f32({1.0f, 2.0f, -0.5f}, {3});
  Tensor bias = Tensor::from_f32({0.0f, 0.1f, 0.2f}, {3});
  Tensor mean = Tensor::from_f32({0.5f, -0.2f, 0.0f}, {3});
  Tensor var = Tensor::from_f32({1.0f, 0.25f, 4.0f}, {3});
  float eps = 1e-3f;
  auto y = run_op("BatchNormalization", {in(x), in(scale), in(bias), in(mean), in(var)},
                  {{"epsilon", eps}})[0];
  Tensor want(ir::DType::kF32, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t c = (i / 4) % 3;
    want.data<float>()[i] =
        static_cast<float>((x.data<float>()[i] - mean.data<float>()[c]) /
                               std::sqrt(var.data<float>()[c] + eps) * scale.data<float>()[c] +
                           bias.data<float>()[c]);
  }
  expect_close(y, want);
}

TEST(BatchNormalization, TrainingModeUsesBiasedBatchVariance) {
  // One channel holding 1, 2, 3, 4 over (N=2, D=2): batch mean 2.5, biased
  // variance 1.25; running = 0.9 * input + 0.1 * batch.
  Tensor x = Tensor::from_f32({1, 2, 3, 4}, {2, 1, 2});
  Tensor one = Tensor::from_f32({1}, {1}), zero = Tensor::from_f32({0}, {1});
  auto out = run_op("BatchNormalization", {in(x), in(one), in(zero), in(zero), in(one)},
                    {{"training_mode", int64_t{1}}, {"epsilon", 0.0f}}, 3);
  float s = 1.0f / std::sqrt(1.25f);
  expect_close(out[0], {-1.5f * s, -0.5f * s, 0.5f * s, 1.5f * s});
  expect_close(out[1], {0.25f});
  expect_close(out[2], {0.9f + 0.125f});
  // momentum 0.5.
  out = run_op("BatchNormalization", {in(x), in(one), in(zero), in(zero), in(one)},
               {{"training_mode", int64_t{1}}, {"momentum", 0.5f}}, 3);
  expect_close(out[1], {1.25f});
  expect_close(out[2], {1.125f});
}

TEST(BatchNormalization, InvalidModelsAreRefused) {
  Tensor x = wave({2, 3, 4});
  Tensor p3 = wave({3}), p4 = wave({4});
  EXPECT_THROW(run_op("BatchNormalization", {in(x), in(p4), in(p3), in(p3), in(p3)}), ModelError);
  // Running statistics outputs without training_mode (opset < 14 training form).
  EXPECT_THROW(run_op("BatchNormalization", {in(x), in(p3), in(p3), in(p3), in(p3)}, {}, 3),
               UnsupportedOp);
}

TEST(LayerNormalization, HandComputedWithStatistics) {
  // Rows (1, 2, 3, 4) and (2, 2, 2, 2): mean 2.5, variance 1.25; mean 2, variance 0.
  Tensor x = Tensor::from_f32({1, 2, 3, 4, 2, 2, 2, 2}, {2, 4});
  Tensor scale = Tensor::from_f32({1, 2, 1, 1}, {4});
  Tensor bias = Tensor::from_f32({0, 0, 0, 1}, {4});
  auto out = run_op("LayerNormalization", {in(x), in(scale), in(bias)}, {{"epsilon", 0.25f}}, 3);
  float inv = 1.0f / std::sqrt(1.5f);
  expect_close(out[0], {-1.5f * inv, -1.0f * inv, 0.5f * inv, 1.5f * inv + 1, 0, 0, 0, 1});
  ASSERT_EQ(out[1].shape(), (Shape{2, 1}));
  expect_close(out[1], {2.5f, 2.0f});
  expect_close(out[2], {inv, 2.0f});
}

TEST(LayerNormalization, AxisAndBroadcastScale) {
  // axis 1 of (2, 3, 4) normalises over 12 values; Scale (1, 4) broadcasts over them.
  Tensor x = wave({2, 3, 4});
  Tensor scale = wave({1, 4}, 0.5);
  auto out = run_op("LayerNormalization", {in(x), in(scale)}, {{"axis", int64_t{1}}}, 3);
  ASSERT_EQ(out[1].shape(), (Shape{2, 1, 1}));
  Tensor want(ir::DType::kF32, x.shape());
  for (int64_t r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < 12; ++i) m += x.data<float>()[r * 12 + i] / 12.0;
    for (int64_t i = 0; i < 12; ++i) v += std::pow(x.data<float>()[r * 12 + i] - m, 2) / 12.0;
    for (int64_t i = 0; i < 12; ++i)
      want.data<float>()[r * 12 + i] = static_cast<float>(
          (x.data<float>()[r * 12 + i] - m) / std::sqrt(v + 1e-5) * scale.data<float>()[i % 4]);
    EXPECT_NEAR(out[1].data<float>()[r], m, 1e-6);
    EXPECT_NEAR(out[2].data<float>()[r], 1 / std::sqrt(v + 1e-5), 1e-4);
  }
  expect_close(out[0], want);
}

TEST(LayerNormalization, InvalidModelsAreRefused) {
  Tensor x = wave({2, 3, 4});
  // Scale varying along a non-normalised axis.
  EXPECT_THROW(run_op("LayerNormalization", {in(x), in(wave({3, 4}))}), ModelError);
  EXPECT_THROW(run_op("LayerNormalization", {in(x), in(wave({4}))}, {{"axis", int64_t{3}}}),
               ModelError);
  EXPECT_THROW(run_op("LayerNormalization", {in(x), in(wave({4}))}, {{"stash_type", int64_t{10}}}),
               UnsupportedOp);
}

}  // namespace
}  // namespace pipetrain::test
