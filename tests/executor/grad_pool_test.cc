// MaxPoolGrad and AveragePoolGrad: against PyTorch autograd (values pasted;
// x = wave(...), y = F.max_pool*/avg_pool*(x, ...), y.backward(wave(y.shape, 1.0))),
// against the forward's own Indices (MaxPool) and as the exact adjoint of the
// forward (AveragePool is linear: <dY, pool(X)> = <pool_grad(dY), X>).
#include <gtest/gtest.h>

#include "tests/executor/nn_test_util.h"

namespace pipetrain::test {
namespace {

using ir::Shape;
using ir::Tensor;
using Ints = std::vector<int64_t>;
using Attrs = std::map<std::string, ir::Attribute>;

Tensor max_pool_grad(const Tensor& dy, const Tensor& x, const Attrs& attrs) {
  return run_op("MaxPoolGrad", {in(dy), in(x)}, attrs)[0];
}

Tensor avg_pool_grad(const Tensor& dy, const Shape& x, Attrs attrs) {
  attrs["input_shape"] = Ints(x.begin(), x.end());
  return run_op("AveragePoolGrad", {in(dy)}, std::move(attrs))[0];
}

TEST(MaxPoolGrad, HandComputedTiesGoToTheFirstMaximum) {
  // 1x1x2x4, 2x2 windows, stride 2: window 0 holds 5 twice (first in scan
  // order: (0, 1)), window 1 holds 8 at (0, 2) and (1, 3).
  Tensor x = Tensor::from_f32({1, 5, 8, 0, 5, 4, 7, 8}, {1, 1, 2, 4});
  Tensor dy = Tensor::from_f32({10, 20}, {1, 1, 1, 2});
  expect_close(max_pool_grad(dy, x, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}),
               {0, 10, 20, 0, 0, 0, 0, 0}, 0, 0);
}

TEST(MaxPoolGrad, OverlappingWindowsWithTiesMatchTorch) {
  // x = round(2 * wave((1, 2, 5, 6), 0, 2)) / 2: plateaus of equal values;
  // F.max_pool2d(x, 3, 1, 1): overlapping windows add into shared maxima.
  Tensor x = Tensor::from_f32(
      {0, 0.5f, 1.5f, 2, 2, 2, 1.5f, 1, 0.5f, -0.5f, -1, -1.5f, -2, -2, -2, -1.5f, -0.5f,
       0, 0.5f, 1.5f, 2, 2, 2, 1.5f, 1, 0.5f, -0.5f, -1, -1.5f, -2, -2, -2, -1.5f, -0.5f,
       0, 0.5f, 1.5f, 2, 2, 2, 1.5f, 1, 0.5f, -0.5f, -1, -1.5f, -2, -2, -2, -1.5f, -0.5f,
       0, 1,    1.5f, 2, 2, 2, 1.5f, 1, 0.5f},
      {1, 2, 5, 6});
  Attrs attrs = {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}};
  expect_close(max_pool_grad(wave({1, 2, 5, 6}, 1.0), x, attrs), {0,
                                                                  0,
                                                                  0.5463772f,
                                                                  -0.1995462f,
                                                                  -0.6492577f,
                                                                  0,
                                                                  0.01637849f,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0.5415828f,
                                                                  -0.5119152f,
                                                                  -0.05874676f,
                                                                  0.01779875f,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  -0.5097836f,
                                                                  -0.05737782f,
                                                                  0.01921814f,
                                                                  0.09321302f,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0,
                                                                  0.7701133f,
                                                                  1.632905f,
                                                                  0.8733781f,
                                                                  0.7536498f,
                                                                  0,
                                                                  0,
                                                                  0});
}

TEST(MaxPoolGrad, CeilModeDilationAndPadsMatchTorch) {
  // F.max_pool2d(wave((1,1,5,6)), (2,3), (2,1), (1,1), (2,1), ceil_mode=True).
  Attrs attrs = {{"kernel_shape", Ints{2, 3}},
                 {"strides", Ints{2, 1}},
                 {"pads", Ints{1, 1, 1, 1}},
                 {"dilations", Ints{2, 1}},
                 {"ceil_mode", int64_t{1}}};
  expect_close(max_pool_grad(wave({1, 1, 3, 6}, 1.0), wave({1, 1, 5, 6}), attrs),
               {0, 0, 0, 0, 0, 0, 1.743052f, 0.9857192f,  0.8581178f,  0.6143743f, 0.287478f,    0,
                0, 0, 0, 0, 0, 0, 0,         -0.7467654f, -0.8892548f, -1.902462f, -0.09160233f, 0,
                0, 0, 0, 0, 0, 0});
}

TEST(MaxPoolGrad, OneDimensionalWithPadsMatchesTorch) {
  // F.max_pool1d(wave((2,1,9), 0.3), 3, 2, 1).
  Attrs attrs = {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}};
  expect_close(max_pool_grad(wave({2, 1, 5}, 1.0), wave({2, 1, 9}, 0.3), attrs),
               {0, 0.841471f, 0, 1.965627f, 0, 0.8581178f, 0, 0.6143743f, 0, 0.287478f,
                -0.07832703f, 0, 0, 0, -0.4335309f, 0, -0.7300584f, -0.9277759f});
}

TEST(MaxPoolGrad, RoutesToTheForwardIndices1dTo3d) {
  // dX must be the scatter-add of dY at MaxPool's own Indices output, for
  // every geometry: auto_pad, ceil_mode, dilations, 1-D..3-D, with plateaus
  // of ties (the input is rounded to multiples of 0.5).
  struct Case {
    Shape x;
    Attrs attrs;
  };
  const std::vector<Case> cases = {
      {{2, 3, 13},
       {{"kernel_shape", Ints{3}},
        {"strides", Ints{2}},
        {"pads", Ints{1, 2}},
        {"dilations", Ints{2}},
        {"ceil_mode", int64_t{1}}}},
      {{1, 2, 9, 11},
       {{"kernel_shape", Ints{3, 4}},
        {"strides", Ints{2, 3}},
        {"pads", Ints{1, 2, 2, 3}},
        {"dilations", Ints{1, 2}}}},
      {{2, 2, 7, 8},
       {{"kernel_shape", Ints{3, 3}},
        {"strides", Ints{2, 2}},
        {"auto_pad", std::string("SAME_UPPER")}}},
      {{2, 2, 7, 8},
       {{"kernel_shape", Ints{2, 3}},
        {"strides", Ints{2, 2}},
        {"auto_pad", std::string("SAME_LOWER")}}},
      {{1, 3, 6, 7}, {{"kernel_shape", Ints{2, 2}}, {"auto_pad", std::string("VALID")}}},
      {{1, 2, 6, 6}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}},
      // Windows that halve the rows (the pair-at-a-time path): rows of 7, 9
      // and 17 windows, inputs outside every window, one row high, 1-D, 3-D.
      {{2, 3, 8, 14}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}},
      {{1, 2, 9, 19}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}},
      {{1, 2, 6, 34}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}},
      {{1, 2, 6, 8}, {{"kernel_shape", Ints{1, 2}}, {"strides", Ints{1, 2}}}},
      {{2, 3, 13}, {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}}},
      {{1, 2, 3, 4, 6}, {{"kernel_shape", Ints{1, 2, 2}}, {"strides", Ints{1, 2, 2}}}},
      {{1, 1, 4, 5, 7},
       {{"kernel_shape", Ints{2, 2, 3}},
        {"strides", Ints{1, 2, 3}},
        {"pads", Ints{1, 0, 2, 0, 1, 1}},
        {"dilations", Ints{2, 1, 2}},
        {"ceil_mode", int64_t{1}}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ir::shape_str(c.x));
    Tensor x = wave(c.x, 0.4, 2.0);
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = std::round(x.data<float>()[i] * 2) / 2;
    auto fwd = run_op("MaxPool", {in(x)}, c.attrs, 2);
    Tensor dy = wave(fwd[0].shape(), 1.3);
    Tensor want(ir::DType::kF32, x.shape());
    const std::vector<int64_t> idx = fwd[1].to_i64();
    for (size_t o = 0; o < idx.size(); ++o) want.data<float>()[idx[o]] += dy.data<float>()[o];
    expect_close(max_pool_grad(dy, x, c.attrs), want, 0, 0);
    // With NaNs and signed zeros in X, and dY's own signed zeros, bit for
    // bit: the first NaN or the first of equal zeros takes the gradient, and
    // dX holds 0 + dY there (+0 for a -0).
    const Tensor xs = ties_zeros_and_nans(c.x);
    fwd = run_op("MaxPool", {in(xs)}, c.attrs, 2);
    Tensor dys = wave(fwd[0].shape(), 1.3);
    for (int64_t i = 0; i < dys.numel(); i += 4) dys.data<float>()[i] = -0.0f;
    Tensor wants(ir::DType::kF32, x.shape());
    const std::vector<int64_t> idxs = fwd[1].to_i64();
    for (size_t o = 0; o < idxs.size(); ++o) wants.data<float>()[idxs[o]] += dys.data<float>()[o];
    expect_same_bits(max_pool_grad(dys, xs, c.attrs), wants);
  }
}

TEST(AveragePoolGrad, CeilModeWithAndWithoutPadCountMatchTorch) {
  // F.avg_pool2d(wave((1,1,5,6)), (3,2), (2,2), (1,1), ceil_mode=True, count_include_pad=...).
  Attrs attrs = {{"kernel_shape", Ints{3, 2}},
                 {"strides", Ints{2, 2}},
                 {"pads", Ints{1, 1, 1, 1}},
                 {"ceil_mode", int64_t{1}}};
  Tensor dy = wave({1, 1, 3, 4}, 1.0);
  attrs["count_include_pad"] = int64_t{1};
  expect_close(avg_pool_grad(dy, {1, 1, 5, 6}, attrs),
               {0.1402452f,   0.163318f,   0.163318f,   0.1642865f,  0.1642865f,  0.1430196f,
                0.2426409f,   0.211231f,   0.211231f,   0.151232f,   0.151232f,   0.07076449f,
                0.1023957f,   0.047913f,   0.047913f,   -0.0130545f, -0.0130545f, -0.07225515f,
                -0.01928068f, -0.1067163f, -0.1067163f, -0.1797084f, -0.1797084f, -0.2283778f,
                -0.1216764f,  -0.1546293f, -0.1546293f, -0.1666539f, -0.1666539f, -0.1561226f});
  attrs["count_include_pad"] = int64_t{0};
  expect_close(avg_pool_grad(dy, {1, 1, 5, 6}, attrs),
               {0.4207355f,  0.244977f,  0.244977f,  0.2464298f,  0.2464298f,  0.4290589f,
                0.6255269f,  0.29289f,   0.29289f,   0.2333753f,  0.2333753f,  0.2845486f,
                0.2047914f,  0.047913f,  0.047913f,  -0.0130545f, -0.0130545f, -0.1445103f,
                -0.1602378f, -0.184031f, -0.184031f, -0.2630353f, -0.2630353f, -0.6128782f,
                -0.3650292f, -0.231944f, -0.231944f, -0.2499808f, -0.2499808f, -0.4683679f});
}

TEST(AveragePoolGrad, ThreeDimensionalMatchesTorch) {
  // F.avg_pool3d(wave((1,2,3,4,4), 0.3), (2,2,3), (1,2,1), (1,0,1), count_include_pad=False).
  Attrs attrs = {{"kernel_shape", Ints{2, 2, 3}},
                 {"strides", Ints{1, 2, 1}},
                 {"pads", Ints{1, 0, 1, 1, 0, 1}}};
  Tensor dx = avg_pool_grad(wave({1, 2, 4, 2, 4}, 1.0), {1, 2, 3, 4, 4}, attrs);
  expect_close(
      dx, {0.2051138f,    0.2860734f,   0.2644004f,   0.1783971f,   0.2051138f,    0.2860734f,
           0.2644004f,    0.1783971f,   0.0701839f,   0.04854587f,  -0.08712722f,  -0.09706323f,
           0.0701839f,    0.04854587f,  -0.08712722f, -0.09706323f, -0.02381448f,  -0.02537104f,
           -0.002466805f, 0.004420064f, -0.02381448f, -0.02537104f, -0.002466805f, 0.004420064f,
           0.02625078f,   0.04107929f,  0.04991777f,  0.03714616f,  0.02625078f,   0.04107929f,
           0.04991777f,   0.03714616f,  -0.0876077f,  -0.1608868f,  -0.2522286f,   -0.2002067f,
           -0.0876077f,   -0.1608868f,  -0.2522286f,  -0.2002067f,  -0.1997113f,   -0.2512405f,
           -0.1591785f,   -0.08622446f, -0.1997113f,  -0.2512405f,  -0.1591785f,   -0.08622446f,
           0.118938f,     0.1987887f,   0.2717571f,   0.2088877f,   0.118938f,     0.1987887f,
           0.2717571f,    0.2088877f,   0.1850168f,   0.2241414f,   0.1164638f,    0.0522803f,
           0.1850168f,    0.2241414f,   0.1164638f,   0.0522803f,   -0.03675037f,  -0.04789742f,
           -0.03528388f,  -0.0212014f,  -0.03675037f, -0.04789742f, -0.03528388f,  -0.0212014f,
           0.002155383f,  0.01130626f,  0.03265437f,  0.02847165f,  0.002155383f,  0.01130626f,
           0.03265437f,   0.02847165f,  0.0623968f,   0.03754813f,  -0.09765834f,  -0.1042751f,
           0.0623968f,    0.03754813f,  -0.09765834f, -0.1042751f,  -0.195652f,    -0.2799292f,
           -0.277588f,    -0.192766f,   -0.195652f,   -0.2799292f,  -0.277588f,    -0.192766f});
}

TEST(AveragePoolGrad, SameUpper1dHandComputed) {
  // Forward: x (1,1,5), k 2, s 2, SAME_UPPER: windows {0,1}, {2,3}, {4} (pad
  // not counted), so dX = (dy0/2, dy0/2, dy1/2, dy1/2, dy2).
  Tensor dy = Tensor::from_f32({2, 4, 8}, {1, 1, 3});
  expect_close(avg_pool_grad(dy, {1, 1, 5},
                             {{"kernel_shape", Ints{2}},
                              {"strides", Ints{2}},
                              {"auto_pad", std::string("SAME_UPPER")}}),
               {1, 1, 2, 2, 8}, 0, 0);
}

TEST(AveragePoolGrad, IsTheAdjointOfTheForward1dTo3d) {
  // <dY, AveragePool(X)> = <AveragePoolGrad(dY), X> for every geometry.
  struct Case {
    Shape x;
    Attrs attrs;
  };
  const std::vector<Case> cases = {
      {{2, 3, 13},
       {{"kernel_shape", Ints{3}},
        {"strides", Ints{2}},
        {"pads", Ints{1, 2}},
        {"dilations", Ints{2}},
        {"ceil_mode", int64_t{1}}}},
      {{1, 2, 9, 11},
       {{"kernel_shape", Ints{3, 4}},
        {"strides", Ints{2, 3}},
        {"pads", Ints{1, 2, 2, 3}},
        {"count_include_pad", int64_t{1}}}},
      {{1, 2, 9, 11},
       {{"kernel_shape", Ints{3, 4}},
        {"strides", Ints{2, 3}},
        {"pads", Ints{1, 2, 2, 3}},
        {"ceil_mode", int64_t{1}}}},
      {{2, 2, 7, 8},
       {{"kernel_shape", Ints{3, 3}},
        {"strides", Ints{2, 2}},
        {"auto_pad", std::string("SAME_LOWER")},
        {"count_include_pad", int64_t{1}}}},
      {{1, 3, 6, 7}, {{"kernel_shape", Ints{2, 2}}, {"auto_pad", std::string("VALID")}}},
      {{1, 1, 4, 5, 7},
       {{"kernel_shape", Ints{2, 2, 3}},
        {"strides", Ints{1, 2, 3}},
        {"pads", Ints{1, 0, 2, 0, 1, 1}},
        {"ceil_mode", int64_t{1}},
        {"count_include_pad", int64_t{1}}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ir::shape_str(c.x));
    Tensor x = wave(c.x, 0.4);
    Tensor y = run_op("AveragePool", {in(x)}, c.attrs)[0];
    Tensor dy = wave(y.shape(), 1.3);
    Tensor dx = avg_pool_grad(dy, c.x, c.attrs);
    double lhs = 0, rhs = 0, scale = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      lhs += dy.at(i) * y.at(i);
      scale += std::abs(dy.at(i) * y.at(i));
    }
    for (int64_t i = 0; i < x.numel(); ++i) rhs += dx.at(i) * x.at(i);
    EXPECT_NEAR(lhs, rhs, 1e-6 * scale);
  }
}

}  // namespace
}  // namespace pipetrain::test
