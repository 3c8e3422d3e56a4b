// Activation, Softmax/LogSoftmax and Dropout kernels; expected values are
// hand-computed or torch's (pasted).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tests/executor/op_test_util.h"
#include "tests/executor/tensor_fill.h"

namespace pipetrain {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;
using test::absent;
using test::constant;
using test::in;
using test::pattern;
using test::run_op;
using test::values;

Tensor f32(std::vector<float> v, Shape s) {
  return Tensor::from_f32(v, std::move(s));
}
Tensor scalar(float v) {
  return Tensor::scalar_f32(v);
}
Tensor flag(bool v) {
  Tensor t(DType::kBool, {});
  t.data<uint8_t>()[0] = v;
  return t;
}

const std::vector<float> kX = {-3, -1, -0.5f, 0, 0.5f, 1, 3};

TEST(Relu, FloatAndInteger) {
  EXPECT_EQ(values(run_op("Relu", {in(f32({-2, 0, 3}, {3}))})[0]), (std::vector<double>{0, 0, 3}));
  auto y = run_op("Relu", {in(Tensor::from_i64({-2, 5}, {2}))})[0];
  ASSERT_EQ(y.dtype(), DType::kI64);
  EXPECT_EQ(values(y), (std::vector<double>{0, 5}));
}

TEST(LeakyRelu, DefaultAndCustomAlpha) {
  EXPECT_EQ(values(run_op("LeakyRelu", {in(f32({-2, 3}, {2}))})[0])[0], -0.02f);
  auto y = run_op("LeakyRelu", {in(f32({-2, 3}, {2}))}, {{"alpha", 0.5f}})[0];
  EXPECT_EQ(values(y), (std::vector<double>{-1, 3}));
}

TEST(Sigmoid, StableForLargeInputs) {
  auto y = run_op("Sigmoid", {in(f32({-200, 0, 200, 1}, {4}))})[0];
  EXPECT_EQ(y.at(0), 0.0);
  EXPECT_EQ(y.at(1), 0.5);
  EXPECT_EQ(y.at(2), 1.0);
  EXPECT_FLOAT_EQ(y.at(3), 1.0f / (1.0f + std::exp(-1.0f)));
  EXPECT_FLOAT_EQ(run_op("Tanh", {in(f32({0.5f}, {1}))})[0].at(0), std::tanh(0.5f));
}

TEST(Gelu, ExactAndTanhMatchTorch) {
  // torch.nn.functional.gelu(x) and gelu(x, approximate='tanh')
  const std::vector<double> exact = {
      -0.004049867391586304, -0.1586552858352661, -0.1542687863111496, 0.0,
      0.3457311987876892,    0.8413447141647339,  2.995950222015381};
  const std::vector<double> tanh = {
      -0.0036374330520629883, -0.15880799293518066, -0.1542859971523285, 0.0,
      0.3457140028476715,     0.8411920070648193,   2.9963626861572266};
  auto y = run_op("Gelu", {in(f32(kX, {7}))})[0];
  auto t = run_op("Gelu", {in(f32(kX, {7}))}, {{"approximate", std::string("tanh")}})[0];
  for (size_t i = 0; i < kX.size(); ++i) {
    EXPECT_NEAR(y.at(static_cast<int64_t>(i)), exact[i], 1e-6) << i;
    EXPECT_NEAR(t.at(static_cast<int64_t>(i)), tanh[i], 1e-6) << i;
  }
  EXPECT_THROW(run_op("Gelu", {in(f32(kX, {7}))}, {{"approximate", std::string("erf")}}),
               UnsupportedOp);
}

TEST(Clip, AttributeAndInputForms) {
  auto x = f32({-2, -0.5f, 0.5f, 2}, {4});
  EXPECT_EQ(values(run_op("Clip", {in(x), in(scalar(-1)), in(scalar(1))})[0]),
            (std::vector<double>{-1, -0.5, 0.5, 1}));
  EXPECT_EQ(values(run_op("Clip", {in(x), absent(), constant(scalar(0))})[0]),
            (std::vector<double>{-2, -0.5, 0, 0}));
  EXPECT_EQ(values(run_op("Clip", {in(x)}, {{"min", 0.0f}})[0]),
            (std::vector<double>{0, 0, 0.5, 2}));
  EXPECT_EQ(values(run_op("Clip", {in(x)})[0]), values(x));
  // min > max: everything becomes max (ONNX).
  EXPECT_EQ(values(run_op("Clip", {in(x), in(scalar(1)), in(scalar(0))})[0]),
            (std::vector<double>{0, 0, 0, 0}));
  auto yi = run_op("Clip", {in(Tensor::from_i64({-5, 3, 9}, {3})), in(Tensor::from_i64({0}, {})),
                            in(Tensor::from_i64({4}, {}))})[0];
  EXPECT_EQ(values(yi), (std::vector<double>{0, 3, 4}));
  EXPECT_THROW(run_op("Clip", {in(x), in(f32({0, 1}, {2}))}), ModelError);
  EXPECT_THROW(run_op("Clip", {in(x), in(scalar(0))}, {{"min", 0.0f}}), ModelError);
}

TEST(Softmax, LastAndMiddleAxis) {
  auto y = run_op("Softmax", {in(f32({1, 2, 3, 0, 0, 0}, {2, 3}))})[0];
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(y.at(0), std::exp(1.0) / z, 1e-7);
  EXPECT_NEAR(y.at(2), std::exp(3.0) / z, 1e-7);
  EXPECT_NEAR(y.at(4), 1.0 / 3, 1e-7);
  // Axis 1 of (2, 3, 4): every (i, :, k) column sums to 1 and matches a direct computation.
  Tensor x = pattern({2, 3, 4});
  auto s = run_op("Softmax", {in(x)}, {{"axis", int64_t{1}}})[0];
  auto ls = run_op("LogSoftmax", {in(x)}, {{"axis", int64_t{-2}}})[0];
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 4; ++k) {
      double sum = 0;
      for (int64_t j = 0; j < 3; ++j) sum += std::exp(x.at(i * 12 + j * 4 + k));
      for (int64_t j = 0; j < 3; ++j) {
        const int64_t at = i * 12 + j * 4 + k;
        EXPECT_NEAR(s.at(at), std::exp(x.at(at)) / sum, 1e-6);
        EXPECT_NEAR(ls.at(at), x.at(at) - std::log(sum), 1e-6);
      }
    }
}

TEST(Softmax, LogSoftmaxKeepsDigitsForLargeInputs) {
  // numpy: x - max - log(sum(exp(x - max))) for [10000, 10001, 10002, 10003]
  auto y = run_op("LogSoftmax", {in(f32({10000, 10001, 10002, 10003}, {1, 4}))})[0];
  EXPECT_NEAR(y.at(0), -3.4401896, 1e-5);
  EXPECT_NEAR(y.at(3), -0.4401897, 1e-5);
  EXPECT_THROW(run_op("Softmax", {in(pattern({2, 3}))}, {{"axis", int64_t{2}}}), ModelError);
}

TEST(Dropout, InferenceIsIdentityWithFullMask) {
  Tensor x = pattern({3, 4});
  auto out = run_op("Dropout", {in(x), in(scalar(0.5f))}, {{"seed", int64_t{0}}}, 2);
  EXPECT_EQ(values(out[0]), values(x));
  ASSERT_EQ(out[1].dtype(), DType::kBool);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(out[1].at(i), 1);
  // training_mode = false overrides nothing when the run is not training.
  out = run_op("Dropout", {in(x), absent(), in(flag(false))}, {}, 2);
  EXPECT_EQ(values(out[0]), values(x));
}

TEST(Dropout, TrainingIsDeterministicAndScaled) {
  Tensor x(DType::kF32, {100, 100});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 1.0f;
  auto a = run_op("Dropout", {in(x), in(scalar(0.25f)), in(flag(true))}, {}, 2, false, 42);
  auto b = run_op("Dropout", {in(x), in(scalar(0.25f)), in(flag(true))}, {}, 2, false, 42);
  auto c = run_op("Dropout", {in(x), in(scalar(0.25f))}, {}, 2, /*training=*/true, 43);
  EXPECT_EQ(values(a[0]), values(b[0]));
  EXPECT_NE(values(a[1]), values(c[1]));
  int64_t kept = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = a[1].at(i) != 0;
    kept += keep;
    EXPECT_EQ(a[0].at(i), keep ? static_cast<double>(1.0f / 0.75f) : 0.0);
  }
  EXPECT_NEAR(static_cast<double>(kept) / 10000, 0.75, 0.02);
  // The seed attribute fixes the mask whatever the run's seed.
  auto s1 = run_op("Dropout", {in(x)}, {{"seed", int64_t{5}}}, 2, true, 1);
  auto s2 = run_op("Dropout", {in(x)}, {{"seed", int64_t{5}}}, 2, true, 2);
  EXPECT_EQ(values(s1[1]), values(s2[1]));
  // ratio 0 is the identity even in training; the opset-10 ratio attribute works.
  auto z = run_op("Dropout", {in(x), in(scalar(0.0f)), in(flag(true))}, {}, 2);
  EXPECT_EQ(values(z[0]), values(x));
  auto r = run_op("Dropout", {in(x)}, {{"ratio", 0.5f}}, 1, true, 3)[0];
  double zeros = 0;
  for (double v : values(r)) {
    EXPECT_TRUE(v == 0.0 || v == 2.0) << v;
    zeros += v == 0.0;
  }
  EXPECT_NEAR(zeros / 10000, 0.5, 0.02);
  EXPECT_THROW(run_op("Dropout", {in(x), constant(scalar(1.5f))}), ModelError);
}

}  // namespace
}  // namespace pipetrain
