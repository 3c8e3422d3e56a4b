// Activation gradient kernels (ReluGrad ... LogSoftmaxGrad) against PyTorch
// autograd (values pasted) on wave() inputs; the saved Y comes from our own
// forward kernel, as autodiff wires it. Generator, per case:
//   x = wave(shape, ...); dy = wave(shape, 1.0, 2.0)
//   xt = torch.tensor(x, dtype=float64, requires_grad=True); f(xt).backward(dy); xt.grad
#include <gtest/gtest.h>

#include <cmath>

#include "tests/executor/nn_test_util.h"

namespace pipetrain::test {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

Tensor f32(std::vector<float> v, Shape s) {
  return Tensor::from_f32(v, std::move(s));
}

/// Runs the forward `op` on x and returns its output (the Y a gradient op reads).
Tensor forward(const std::string& op, const Tensor& x,
               std::map<std::string, ir::Attribute> attrs = {}) {
  return run_op(op, {in(x)}, std::move(attrs))[0];
}

Tensor grad(const std::string& op, const Tensor& dy, const Tensor& saved,
            std::map<std::string, ir::Attribute> attrs = {}) {
  return run_op(op, {in(dy), in(saved)}, std::move(attrs))[0];
}

TEST(ReluGrad, Rank1MatchesTorchAndCutsAtZero) {
  // x[0] = 0 exactly: relu'(0) = 0 in PyTorch.
  Tensor x = wave({7}), dy = wave({7}, 1.0, 2.0);
  Tensor dx = grad("ReluGrad", dy, forward("Relu", x));
  expect_close(dx, {0, 1.959816f, 1.971438f, 1.716236f, 1.228749f, 0.574956f, -0.1566541f});
  EXPECT_EQ(dx.at(0), 0.0);
}

TEST(LeakyReluGrad, Rank2DefaultAndCustomAlphaMatchTorch) {
  // F.leaky_relu(x, alpha); at x = 0 (element 0) the slope is alpha.
  Tensor x = wave({3, 4}), dy = wave({3, 4}, 1.0, 2.0);
  expect_close(grad("LeakyReluGrad", dy, x, {{"alpha", 0.2f}}),
               {0.3365884f, 1.959816f, 1.971438f, 1.716236f, 1.228749f, 0.574956f, -0.1566541f,
                -0.8670618f, -1.460117f, -0.3711103f, -0.3999693f, -0.3746943f});
  expect_close(grad("LeakyReluGrad", dy, x),
               {0.01682942f, 1.959816f, 1.971438f, 1.716236f, 1.228749f, 0.574956f, -0.1566541f,
                -0.8670618f, -1.460117f, -0.01855552f, -0.01999846f, -0.01873471f});
}

TEST(HardSwishAndHardSigmoid, ForwardAndGradMatchTorchAcrossTheKinks) {
  // x spans [-4.7, 4.9]: below -3, the curved middle and above 3. HardSigmoid
  // with PyTorch's alpha 1/6 (ONNX's default is 0.2).
  Tensor x = wave({12}, 0.3, 5.0), dy = wave({12}, 1.0, 2.0);
  expect_close(forward("HardSwish", x),
               {1.102685f, 3.10493f, 4.312021f, 4.935501f, 4.890983f, 4.184494f, 2.868781f,
                0.8805941f, -0.2371817f, -0.2556858f, 0, 0});
  expect_close(grad("HardSwishGrad", dy, x),
               {1.670377f, 1.959816f, 1.971438f, 1.716236f, 1.228749f, 0.574956f, -0.2303678f,
                -0.7932846f, -0.4425836f, 0.5233275f, 0, 0});
  const std::map<std::string, ir::Attribute> torch_alpha = {{"alpha", 1.0f / 6}, {"beta", 0.5f}};
  expect_close(forward("HardSigmoid", x, torch_alpha),
               {0.7462668f, 1, 1, 1, 1, 1, 0.9852755f, 0.7074557f, 0.4015576f, 0.1089833f, 0, 0});
  expect_close(
      grad("HardSigmoidGrad", dy, x, torch_alpha),
      {0.2804903f, 0, 0, 0, 0, 0, -0.02610901f, -0.1445103f, -0.2433528f, -0.3092586f, 0, 0});
}

TEST(Mish, ForwardMatchesTorch) {
  // Not in ONNX 1.12's test data (Mish is opset 18); F.mish on the same wave.
  expect_close(forward("Mish", wave({12}, 0.3, 5.0)),
               {1.378997f, 3.09352f, 4.310512f, 4.934998f, 4.890439f, 4.182611f, 2.896201f,
                1.126182f, -0.2447171f, -0.2139119f, -0.08503814f, -0.04222895f});
}

TEST(SigmoidGrad, Rank3MatchesTorch) {
  Tensor x = wave({2, 3, 4}, 0.3, 3.0), dy = wave({2, 3, 4}, 1.0, 2.0);
  expect_close(grad("SigmoidGrad", dy, forward("Sigmoid", x)),
               {0.3477987f,   0.2279392f,   0.1282829f,   0.08029235f, 0.05888495f, 0.03994216f,
                -0.01980051f, -0.1891421f,  -0.3538035f,  -0.2930853f, -0.169671f,  -0.09894326f,
                -0.0675426f,  -0.05075639f, -0.01911791f, 0.09081113f, 0.2946674f,  0.3464592f,
                0.2255914f,   0.1270008f,   0.07973237f,  0.058595f,   0.03940894f, -0.02177024f});
}

TEST(TanhGrad, Rank4MatchesTorch) {
  Tensor x = wave({2, 2, 2, 3}, 0.3, 2.0), dy = wave({2, 2, 2, 3}, 1.0, 2.0);
  expect_close(grad("TanhGrad", dy, forward("Tanh", x)),
               {1.209055f,    0.5570877f,   0.2352546f,   0.1274315f,  0.0944135f,  0.07547969f,
                -0.05066291f, -0.6832252f,  -1.381553f,   -0.8544868f, -0.352582f,  -0.165396f,
                -0.1056744f,  -0.08682926f, -0.04153317f, 0.2794845f,  1.170508f,   1.197525f,
                0.5478637f,   0.2319682f,   0.1263882f,   0.09410361f, 0.07480205f, -0.05606898f},
               1e-4, 2e-5);
}

TEST(GeluGrad, ExactAndTanhMatchTorch) {
  Tensor x = wave({4, 5}, 0.2, 3.0), dy = wave({4, 5}, 1.0, 2.0);
  expect_close(
      grad("GeluGrad", dy, x),
      {1.554187f,  2.197847f,    2.05752f,   1.742754f,  1.244121f,   0.5903801f,  -0.1703147f,
       -0.945919f, -0.6657934f,  0.2036662f, 0.1568165f, 0.04507239f, 0.01820831f, 0.01517757f,
       0.0101669f, -0.06673889f, 0.1668895f, 1.579298f,  2.198525f,   2.053152f});
  expect_close(
      grad("GeluGrad", dy, x, {{"approximate", std::string("tanh")}}),
      {1.553872f,   2.198749f,   2.058453f,  1.742292f,  1.243694f,  0.5904146f,  -0.1704502f,
       -0.9456214f, -0.6657937f, 0.2031345f, 0.1585419f, 0.0450361f, 0.01767731f, 0.01496289f,
       0.01028645f, -0.0668907f, 0.1670294f, 1.578958f,  2.199487f,  2.054044f});
  // "none" is the exact form.
  expect_close(grad("GeluGrad", dy, x, {{"approximate", std::string("none")}}),
               grad("GeluGrad", dy, x), 0, 0);
}

TEST(ClipGrad, BoundsIncludedEitherBoundOptional) {
  // torch.clamp(x, min, max).backward(dy): dy where min <= x <= max (bounds included).
  Tensor x = f32({-2, -0.5f, -0.25f, 0, 1, 1.5f}, {2, 3});
  Tensor dy = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor lo = Tensor::scalar_f32(-0.5f), hi = Tensor::scalar_f32(1.0f);
  auto clip = [&](OpInput a, OpInput b) {
    return run_op("ClipGrad", {in(dy), in(x), std::move(a), std::move(b)})[0];
  };
  expect_close(clip(in(lo), in(hi)), {0, 2, 3, 4, 5, 0}, 0, 0);
  expect_close(clip(in(lo), absent()), {0, 2, 3, 4, 5, 6}, 0, 0);
  expect_close(clip(absent(), in(hi)), {1, 2, 3, 4, 5, 0}, 0, 0);
  expect_close(run_op("ClipGrad", {in(dy), in(x)})[0], dy, 0, 0);
  // min > max: the forward outputs max everywhere, so nothing passes.
  expect_close(clip(in(hi), in(lo)), {0, 0, 0, 0, 0, 0}, 0, 0);
}

TEST(DropoutGrad, ScalesKeptElementsByRatio) {
  Tensor dy = f32({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  Tensor mask(DType::kBool, {2, 2, 2});
  const uint8_t keep[] = {1, 0, 0, 1, 1, 1, 0, 1};
  for (int i = 0; i < 8; ++i) mask.data<uint8_t>()[i] = keep[i];
  // ratio 0.25: kept elements times 1 / 0.75.
  expect_close(run_op("DropoutGrad", {in(dy), in(mask), in(Tensor::scalar_f32(0.25f))})[0],
               {4.0f / 3, 0, 0, 16.0f / 3, 20.0f / 3, 8, 0, 32.0f / 3}, 1e-6, 0);
  // No ratio: 0.5.
  expect_close(run_op("DropoutGrad", {in(dy), in(mask)})[0], {2, 0, 0, 8, 10, 12, 0, 16}, 0, 0);
  expect_close(run_op("DropoutGrad", {in(dy), in(mask), absent()})[0], {2, 0, 0, 8, 10, 12, 0, 16},
               0, 0);
  // ratio 0: dY * mask.
  expect_close(run_op("DropoutGrad", {in(dy), in(mask), in(Tensor::scalar_f32(0.0f))})[0],
               {1, 0, 0, 4, 5, 6, 0, 8}, 0, 0);
}

TEST(DropoutGrad, IsTheForwardsOwnScaling) {
  // Y = X * mask / (1 - ratio) in training, so with dY = 1 and X = 1, dX = Y.
  Tensor ones(DType::kF32, {64});
  for (int i = 0; i < 64; ++i) ones.data<float>()[i] = 1.0f;
  Tensor ratio = Tensor::scalar_f32(0.3f);
  auto fwd = run_op("Dropout", {in(ones), in(ratio)}, {}, 2, /*training=*/true, /*seed=*/7);
  expect_close(run_op("DropoutGrad", {in(ones), in(fwd[1]), in(ratio)})[0], fwd[0], 1e-6, 0);
}

// torch.softmax / torch.log_softmax of wave((2, 3, 4), 0.5, 2.0) along axis 0, 1, 2
// with dy = wave((2, 3, 4), 1.0, 1.5).
const std::vector<std::vector<float>> kSoftmaxGrad = {
    {0.1170039f,  0.082391f,  0.07205216f,  0.06462695f,  0.004242318f,  -0.1987862f,
     -0.3501102f, -0.260268f, -0.149843f,   -0.09508239f, -0.07525506f,  -0.06990634f,
     -0.1170039f, -0.082391f, -0.07205216f, -0.06462695f, -0.004242318f, 0.1987862f,
     0.3501102f,  0.260268f,  0.149843f,    0.09508239f,  0.07525506f,   0.06990634f},
    {0.100047f,    0.2884162f,   0.3334673f,   0.2499315f,   0.01341967f,  -0.2171471f,
     -0.2848213f,  -0.2114987f,  -0.1134667f,  -0.07126912f, -0.04864598f, -0.03843273f,
     -0.03720462f, -0.03520126f, -0.03871257f, -0.04183798f, -0.04361497f, 0.08296193f,
     0.272899f,    0.3134759f,   0.08081959f,  -0.04776067f, -0.2341864f,  -0.271638f},
    {-0.01491478f, 0.01874662f,  0.02967069f,  -0.03350253f, 0.2020438f,   -0.01372154f,
     -0.09770327f, -0.09061903f, 0.0826715f,   -0.03036939f, -0.03571351f, -0.0165886f,
     -0.1163299f,  -0.09124679f, -0.02093814f, 0.2285148f,   -0.04275639f, -0.02094648f,
     0.02531254f,  0.03839033f,  0.1664671f,   0.02561409f,  -0.08445576f, -0.1076254f}};
const std::vector<std::vector<float>> kLogSoftmaxGrad = {
    {1.127506f,   0.7149173f,  0.2157557f,  -0.2631225f, -0.577591f, -0.6070795f,
     -0.5612073f, -0.7682652f, -1.107718f,  -1.371051f,  -1.455844f, -1.316049f,
     -1.127506f,  -0.7149173f, -0.2157557f, 0.2631225f,  0.577591f,  0.6070795f,
     0.5612073f,  0.7682652f,  1.107718f,   1.371051f,   1.455844f,  1.316049f},
    {0.9603228f,  1.210028f,   1.580014f,   1.944346f,   0.1966376f,  0.1974481f,
     -0.0828064f, -0.5515437f, -1.15696f,   -1.407476f,  -1.497208f,  -1.392802f,
     -1.137154f,  -0.7152187f, -0.2160575f, 0.2801433f,  0.7351919f,  0.8313912f,
     0.5812952f,  0.2575006f,  0.4019619f,  -0.1161724f, -0.3652377f, -0.537644f},
    {0.5865864f,   0.2754162f,  -0.2384449f, -0.6235578f,  0.6558043f,   0.2551872f,
     -0.2136623f,  -0.6973292f, 1.459679f,   -0.05061292f, -0.6638475f,  -0.7452187f,
     -0.9469018f,  -0.4508821f, 0.236452f,   1.161332f,    0.4523664f,   0.3842318f,
     -0.08507164f, -0.7515266f, 0.3620339f,  0.1362308f,   -0.09127777f, -0.4069869f}};

TEST(SoftmaxGrad, EveryAxisOfRank3MatchesTorch) {
  Tensor x = wave({2, 3, 4}, 0.5, 2.0), dy = wave({2, 3, 4}, 1.0, 1.5);
  for (int64_t axis = 0; axis < 3; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    auto y = forward("Softmax", x, {{"axis", axis}});
    expect_close(grad("SoftmaxGrad", dy, y, {{"axis", axis}}), kSoftmaxGrad[axis]);
    auto ly = forward("LogSoftmax", x, {{"axis", axis}});
    expect_close(grad("LogSoftmaxGrad", dy, ly, {{"axis", axis}}), kLogSoftmaxGrad[axis]);
  }
  // The default axis is -1.
  expect_close(grad("SoftmaxGrad", dy, forward("Softmax", x)), kSoftmaxGrad[2]);
  expect_close(grad("LogSoftmaxGrad", dy, forward("LogSoftmax", x)), kLogSoftmaxGrad[2]);
  expect_close(grad("SoftmaxGrad", dy, forward("Softmax", x, {{"axis", int64_t{-2}}}),
                    {{"axis", int64_t{-2}}}),
               kSoftmaxGrad[1]);
}

/// (R, C) -> (C, R).
Tensor transpose2(const Tensor& a) {
  const int64_t r = a.shape()[0], c = a.shape()[1];
  Tensor t(DType::kF32, {c, r});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) t.data<float>()[j * r + i] = a.data<float>()[i * c + j];
  return t;
}

TEST(SoftmaxGrad, LongRowsContiguousAndStridedAgree) {
  // Rows of 37 (> the 16 summing lanes, with a tail): the contiguous path on
  // (5, 37) axis 1 and the strided path on the transpose (37, 5) axis 0 compute
  // the same numbers; softmax's gradient sums to 0 along the axis and
  // log_softmax's to sum(dY) (1 - sum p) = 0 as well.
  Tensor x = wave({5, 37}, 0.1, 3.0), dy = wave({5, 37}, 0.7, 1.0);
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    SCOPED_TRACE(op);
    const std::string g = std::string(op) + "Grad";
    Tensor rows = grad(g, dy, forward(op, x, {{"axis", int64_t{1}}}), {{"axis", int64_t{1}}});
    Tensor cols = grad(g, transpose2(dy), forward(op, transpose2(x), {{"axis", int64_t{0}}}),
                       {{"axis", int64_t{0}}});
    expect_close(transpose2(cols), rows, 1e-5, 1e-7);
    for (int64_t r = 0; r < 5; ++r) {
      double s = 0, scale = 0;
      for (int64_t j = 0; j < 37; ++j) {
        s += rows.at(r * 37 + j);
        scale += std::abs(dy.at(r * 37 + j));
      }
      EXPECT_NEAR(s, 0.0, 1e-6 * scale) << "row " << r;
    }
  }
}

}  // namespace
}  // namespace pipetrain::test
