// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss; expected values come
// from the ONNX reference implementations (onnx.backend.test.case.node.*)
// run on the patterns below.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tests/executor/op_test_util.h"

namespace pipetrain {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;
using test::in;
using test::run_op;

/// scores (3, 4): s[i][j] = ((i * 4 + j) % 5) * 0.5 - 1
Tensor scores2d() {
  Tensor t(DType::kF32, {3, 4});
  for (int64_t i = 0; i < 12; ++i) t.data<float>()[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  return t;
}
/// scores (2, 3, 2): x[a][b][c] = ((a * 6 + b * 2 + c) % 7) * 0.3 - 1
Tensor scores3d() {
  Tensor t(DType::kF32, {2, 3, 2});
  for (int64_t i = 0; i < 12; ++i) t.data<float>()[i] = static_cast<float>(i % 7) * 0.3f - 1.0f;
  return t;
}
Tensor labels() {
  return Tensor::from_i64({1, 3, 0}, {3});
}
Tensor weights() {
  return Tensor::from_f32({0.5f, 1.0f, 2.0f, 1.5f}, {4});
}
std::map<std::string, ir::Attribute> attrs(const std::string& reduction) {
  return {{"reduction", reduction}};
}

TEST(SoftmaxCrossEntropy, MeanNoneSumWithLogProb) {
  auto mean = run_op("SoftmaxCrossEntropyLoss", {in(scores2d()), in(labels())}, {}, 2);
  ASSERT_EQ(mean[0].shape(), (Shape{}));
  EXPECT_NEAR(mean[0].at(0), 1.5029451, 1e-6);
  ASSERT_EQ(mean[1].shape(), (Shape{3, 4}));
  EXPECT_NEAR(mean[1].at(0), -2.2873387336730957, 1e-6);
  EXPECT_NEAR(mean[1].at(6), -2.046006441116333, 1e-6);
  EXPECT_NEAR(mean[1].at(11), -2.175490379333496, 1e-6);
  auto none = run_op("SoftmaxCrossEntropyLoss", {in(scores2d()), in(labels())}, attrs("none"))[0];
  ASSERT_EQ(none.shape(), (Shape{3}));
  EXPECT_NEAR(none.at(0), 1.7873387, 1e-6);
  EXPECT_NEAR(none.at(1), 1.5460064, 1e-6);
  EXPECT_NEAR(none.at(2), 1.1754903, 1e-6);
  auto sum = run_op("SoftmaxCrossEntropyLoss", {in(scores2d()), in(labels()), in(weights())},
                    attrs("sum"))[0];
  EXPECT_NEAR(sum.at(0), 4.6940937, 1e-5);
}

TEST(SoftmaxCrossEntropy, MeanWithWeightsDividesByAppliedWeights) {
  auto attr = attrs("mean");
  attr["ignore_index"] = int64_t{3};
  auto y =
      run_op("SoftmaxCrossEntropyLoss", {in(scores2d()), in(labels()), in(weights())}, attr)[0];
  EXPECT_NEAR(y.at(0), 1.5833893, 1e-6);
  // i32 labels give the same result.
  Tensor l32(DType::kI32, {3});
  for (int i = 0; i < 3; ++i) l32.data<int32_t>()[i] = static_cast<int32_t>(labels().at(i));
  auto y32 = run_op("SoftmaxCrossEntropyLoss", {in(scores2d()), in(l32), in(weights())}, attr)[0];
  EXPECT_EQ(y32.at(0), y.at(0));
}

TEST(SoftmaxCrossEntropy, SpatialWithNegativeIgnoreIndex) {
  Tensor l = Tensor::from_i64({0, 2, 1, -1}, {2, 2});
  auto attr = attrs("mean");
  attr["ignore_index"] = int64_t{-1};
  EXPECT_NEAR(run_op("SoftmaxCrossEntropyLoss", {in(scores3d()), in(l)}, attr)[0].at(0), 1.4729246,
              1e-6);
  attr["reduction"] = std::string("none");
  auto none = run_op("SoftmaxCrossEntropyLoss", {in(scores3d()), in(l)}, attr)[0];
  ASSERT_EQ(none.shape(), (Shape{2, 2}));
  EXPECT_NEAR(none.at(0), 1.8151888847351074, 1e-6);
  EXPECT_NEAR(none.at(1), 0.6151887774467468, 1e-6);
  EXPECT_NEAR(none.at(2), 1.9883958101272583, 1e-6);
  EXPECT_EQ(none.at(3), 0.0);
}

TEST(NegativeLogLikelihood, WeightedSpatial) {
  Tensor l = Tensor::from_i64({0, 2, 1, -1}, {2, 2});
  Tensor w = Tensor::from_f32({1, 2, 3}, {3});
  auto attr = attrs("mean");
  attr["ignore_index"] = int64_t{-1};
  EXPECT_NEAR(run_op("NegativeLogLikelihoodLoss", {in(scores3d()), in(l), in(w)}, attr)[0].at(0),
              0.15, 1e-6);
  attr["reduction"] = std::string("none");
  auto none = run_op("NegativeLogLikelihoodLoss", {in(scores3d()), in(l), in(w)}, attr)[0];
  EXPECT_NEAR(none.at(0), 1.0, 1e-6);
  EXPECT_NEAR(none.at(1), -1.5, 1e-6);
  EXPECT_NEAR(none.at(2), 1.4, 1e-6);
  EXPECT_EQ(none.at(3), 0.0);
}

TEST(LossErrors, BadLabelsAndShapes) {
  EXPECT_THROW(
      run_op("NegativeLogLikelihoodLoss", {in(scores2d()), in(Tensor::from_i64({1, 4, 0}, {3}))}),
      RuntimeFault);
  EXPECT_THROW(
      run_op("SoftmaxCrossEntropyLoss", {in(scores2d()), in(Tensor::from_i64({1, 3}, {2}))}),
      ModelError);
  EXPECT_THROW(run_op("SoftmaxCrossEntropyLoss",
                      {in(scores2d()), in(labels()), in(Tensor::from_f32({1, 1}, {2}))}),
               ModelError);
  EXPECT_THROW(run_op("SoftmaxCrossEntropyLoss", {in(scores2d()), in(labels())}, attrs("avg")),
               ModelError);
}

}  // namespace
}  // namespace pipetrain
