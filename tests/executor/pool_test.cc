#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "tests/executor/nn_test_util.h"

namespace pipetrain::test {
namespace {

using ir::Shape;
using ir::Tensor;
using Ints = std::vector<int64_t>;
using Attrs = std::map<std::string, ir::Attribute>;

TEST(MaxPool, HandComputedWithIndices) {
  // 1x1x3x4, 2x2 windows, stride 2, no padding.
  Tensor x = Tensor::from_f32({1, 5, 2, 0, 3, 4, 8, 7, -1, 6, 9, 2}, {1, 1, 3, 4});
  auto out = run_op("MaxPool", {in(x)}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}, 2);
  expect_close(out[0], {5, 8});
  ASSERT_EQ(out[1].dtype(), ir::DType::kI64);
  EXPECT_EQ(out[1].to_i64(), (Ints{1, 6}));
  // storage_order 1 counts the spatial axes column-major: (h, w) -> h + w * H.
  out = run_op(
      "MaxPool", {in(x)},
      {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"storage_order", int64_t{1}}}, 2);
  EXPECT_EQ(out[1].to_i64(), (Ints{0 + 1 * 3, 1 + 2 * 3}));
}

TEST(MaxPool, CeilModeDilationAndPadsMatchTorch) {
  // torch.nn.functional.max_pool2d(wave((1,1,5,6)), (2,3), (2,1), (1,1), (2,1),
  // ceil_mode=True, return_indices=True).
  Tensor x = wave({1, 1, 5, 6});
  auto out = run_op("MaxPool", {in(x)},
                    {{"kernel_shape", Ints{2, 3}},
                     {"strides", Ints{2, 1}},
                     {"pads", Ints{1, 1, 1, 1}},
                     {"dilations", Ints{2, 1}},
                     {"ceil_mode", int64_t{1}}},
                    2);
  expect_close(out[0], {0.796565f, 0.796565f, 0.524044f, 0.180596f, -0.187295f, -0.529836f,
                        0.796565f, 0.898708f, 0.996476f, 0.996476f, 0.996476f, 0.959375f, 0.679305f,
                        0.898708f, 0.996476f, 0.996476f, 0.996476f, 0.959375f});
  EXPECT_EQ(out[1].to_i64(),
            (Ints{6, 6, 7, 8, 9, 10, 6, 20, 21, 21, 21, 22, 19, 20, 21, 21, 21, 22}));
  // Without Indices the kernel takes its row-at-a-time path: same values.
  auto values = run_op("MaxPool", {in(x)},
                       {{"kernel_shape", Ints{2, 3}},
                        {"strides", Ints{2, 1}},
                        {"pads", Ints{1, 1, 1, 1}},
                        {"dilations", Ints{2, 1}},
                        {"ceil_mode", int64_t{1}}})[0];
  expect_close(values, out[0], 0, 0);
}

TEST(MaxPool, ValuesPathMatchesIndicesPath) {
  // Strides, dilations and pads on the last axis, where the values-only path
  // computes per-tap output ranges; 1-D, 2-D and 3-D.
  struct Case {
    Shape x;
    Ints k, s, pads, d;
    int64_t ceil;
  };
  for (const Case& c : std::vector<Case>{
           {{2, 3, 13}, {3}, {2}, {1, 2}, {2}, 1},
           {{1, 2, 9, 11}, {3, 4}, {2, 3}, {1, 2, 2, 3}, {1, 2}, 1},
           {{1, 2, 8, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},
           {{1, 1, 4, 5, 7}, {2, 2, 3}, {1, 2, 3}, {1, 0, 2, 0, 1, 1}, {2, 1, 2}, 1}}) {
    std::map<std::string, ir::Attribute> attrs = {{"kernel_shape", c.k},
                                                  {"strides", c.s},
                                                  {"pads", c.pads},
                                                  {"dilations", c.d},
                                                  {"ceil_mode", c.ceil}};
    Tensor x = wave(c.x, 0.4);
    auto both = run_op("MaxPool", {in(x)}, attrs, 2);
    SCOPED_TRACE(ir::shape_str(c.x));
    expect_close(run_op("MaxPool", {in(x)}, attrs)[0], both[0], 0, 0);
    for (int64_t i = 0; i < both[0].numel(); ++i)
      EXPECT_EQ(x.data<float>()[both[1].to_i64()[static_cast<size_t>(i)]],
                both[0].data<float>()[i]);
  }
}

TEST(MaxPool, IndicesIncludeBatchAndChannelOffsets3d) {
  Tensor x = wave({2, 3, 2, 2, 2});
  auto out = run_op("MaxPool", {in(x)}, {{"kernel_shape", Ints{2, 2, 2}}}, 2);
  ASSERT_EQ(out[0].shape(), (Shape{2, 3, 1, 1, 1}));
  for (int64_t p = 0; p < 6; ++p) {
    int64_t i = out[1].to_i64()[static_cast<size_t>(p)];
    EXPECT_GE(i, p * 8);
    EXPECT_LT(i, p * 8 + 8);
    EXPECT_EQ(x.data<float>()[i], out[0].data<float>()[p]);
  }
}

TEST(MaxPool, WindowsThatHalveTheRowsEqualTheScanOrderMaximum) {
  // Windows as wide as their stride (2, and 1 or 2 high), no padding: the
  // kernel's pair-at-a-time path. It must give the general path's bits, a
  // running std::max from -inf in scan order (which skips a NaN and keeps the
  // first of +0 and -0): rows of 7, 9 and 17 windows (padded copy, the last
  // eight again), odd sizes that leave inputs outside every window, 1-D, 3-D.
  struct Case {
    Shape x;
    Ints k;
  };
  for (const Case& c : std::vector<Case>{{{2, 3, 8, 14}, {2, 2}},
                                         {{1, 2, 9, 19}, {2, 2}},
                                         {{1, 2, 6, 34}, {2, 2}},
                                         {{1, 2, 6, 8}, {1, 2}},
                                         {{2, 3, 13}, {2}},
                                         {{1, 2, 3, 4, 6}, {1, 2, 2}}}) {
    SCOPED_TRACE(ir::shape_str(c.x));
    const Tensor x = ties_zeros_and_nans(c.x);
    const size_t rank = c.k.size();
    // Three spatial axes, leading ones of size 1, as (planes, D, H, W).
    int64_t dims[3] = {1, 1, 1}, k[3] = {1, 1, 1};
    for (size_t i = 0; i < rank; ++i) {
      dims[3 - rank + i] = c.x[2 + i];
      k[3 - rank + i] = c.k[i];
    }
    const int64_t out[3] = {dims[0] / k[0], dims[1] / k[1], dims[2] / k[2]};
    Shape ys(c.x.begin(), c.x.begin() + 2);
    for (size_t i = 0; i < rank; ++i) ys.push_back(out[3 - rank + i]);
    Tensor want(ir::DType::kF32, ys);
    const int64_t planes = c.x[0] * c.x[1];
    float* w = want.data<float>();
    for (int64_t pl = 0; pl < planes; ++pl)
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            float m = -std::numeric_limits<float>::infinity();
            for (int64_t a = 0; a < k[0]; ++a)
              for (int64_t b = 0; b < k[1]; ++b)
                for (int64_t d = 0; d < k[2]; ++d)
                  m = std::max(m, x.data<float>()[((pl * dims[0] + o0 * k[0] + a) * dims[1] +
                                                   o1 * k[1] + b) *
                                                      dims[2] +
                                                  o2 * k[2] + d]);
            *w++ = m;
          }
    const Attrs attrs = {{"kernel_shape", c.k}, {"strides", c.k}};
    expect_same_bits(run_op("MaxPool", {in(x)}, attrs)[0], want);
  }
}

TEST(AveragePool, CeilModeWithAndWithoutPadCountMatchTorch) {
  // torch avg_pool2d(wave((1,1,5,6)), (3,2), (2,2), (1,1), ceil_mode=True, count_include_pad=...).
  // The last column's window starts in the input and runs past the right padding: the
  // divisor counts the padding but not what lies beyond it.
  Tensor x = wave({1, 1, 5, 6});
  std::map<std::string, ir::Attribute> attrs = {{"kernel_shape", Ints{3, 2}},
                                                {"strides", Ints{2, 2}},
                                                {"pads", Ints{1, 1, 1, 1}},
                                                {"ceil_mode", int64_t{1}}};
  attrs["count_include_pad"] = int64_t{1};
  expect_close(run_op("AveragePool", {in(x)}, attrs)[0],
               {0.132761f, 0.290091f, 0.195741f, 0.026768f, 0.033566f, 0.065794f, 0.035704f,
                -0.000237f, 0.147698f, 0.259653f, 0.102586f, -0.028752f},
               1e-4, 1e-5);
  attrs["count_include_pad"] = int64_t{0};
  expect_close(run_op("AveragePool", {in(x)}, attrs)[0],
               {0.398283f, 0.435136f, 0.293612f, 0.080304f, 0.067132f, 0.065794f, 0.035704f,
                -0.000475f, 0.443094f, 0.389479f, 0.153879f, -0.086257f},
               1e-4, 1e-5);
}

TEST(AveragePool, SameUpperAnd1d) {
  Tensor x = Tensor::from_f32({1, 2, 3, 4, 5}, {1, 1, 5});
  // SAME_UPPER, k 2, s 2: out 3, total pad 1 at the end; the last window holds only 5.
  auto y = run_op("AveragePool", {in(x)},
                  {{"kernel_shape", Ints{2}},
                   {"strides", Ints{2}},
                   {"auto_pad", std::string("SAME_UPPER")}})[0];
  expect_close(y, {1.5f, 3.5f, 5.0f});
  // Dilation 2 (opset 19): windows {1, 3}, {2, 4}, {3, 5}.
  y = run_op("AveragePool", {in(x)}, {{"kernel_shape", Ints{2}}, {"dilations", Ints{2}}})[0];
  expect_close(y, {2, 3, 4});
}

TEST(GlobalAveragePool, MeansOverSpatialAxes) {
  Tensor x = wave({2, 3, 4, 5});
  auto y = run_op("GlobalAveragePool", {in(x)})[0];
  ASSERT_EQ(y.shape(), (Shape{2, 3, 1, 1}));
  for (int64_t p = 0; p < 6; ++p) {
    double s = 0;
    for (int64_t i = 0; i < 20; ++i) s += x.data<float>()[p * 20 + i];
    EXPECT_NEAR(y.data<float>()[p], s / 20, 1e-6);
  }
}

TEST(Pool, InvalidModelsAreRefused) {
  Tensor x = wave({1, 1, 4, 4});
  EXPECT_THROW(run_op("MaxPool", {in(x)}), ModelError);  // kernel_shape is required
  EXPECT_THROW(run_op("MaxPool", {in(x)}, {{"kernel_shape", Ints{2}}}), ModelError);
  EXPECT_THROW(
      run_op("AveragePool", {in(x)}, {{"kernel_shape", Ints{2, 2}}, {"pads", Ints{2, 2, 2, 2}}}),
      ModelError);  // a window would see only padding
  EXPECT_THROW(run_op("MaxPool", {in(x)}, {{"kernel_shape", Ints{5, 5}}}), ModelError);
}

}  // namespace
}  // namespace pipetrain::test
