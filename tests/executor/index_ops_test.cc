// Concat, Split, Slice, Gather, Pad: shape rules and CPU kernels. Expected
// values are hand-derived or pasted from numpy (noted per case).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/executor/op_test_util.h"
#include "tests/executor/tensor_fill.h"

namespace pipetrain::test {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

const auto& kAll = kAllDtypes;

std::vector<double> doubles(std::vector<int> v) {
  return {v.begin(), v.end()};
}

TEST(Concat, ThreeInputsAlongMiddleAxisEveryDtype) {
  for (DType t : kAll) {
    Tensor a = iota(t, {2, 1, 3}), b = iota(t, {2, 2, 3}, 100), c = iota(t, {2, 0, 3});
    auto y = run_op("Concat", {in(a), in(b), in(c)}, {{"axis", int64_t{-2}}})[0];
    ASSERT_EQ(y.shape(), (Shape{2, 3, 3})) << ir::dtype_name(t);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 3; ++k) {
          const double want = j == 0 ? a.at(n * 3 + k) : b.at(n * 6 + (j - 1) * 3 + k);
          EXPECT_EQ(y.at(n * 9 + j * 3 + k), want) << ir::dtype_name(t);
        }
  }
}

TEST(Concat, SingleInputAndMismatch) {
  Tensor a = iota(DType::kF32, {2, 3});
  EXPECT_EQ(values(run_op("Concat", {in(a)}, {{"axis", int64_t{0}}})[0]), values(a));
  EXPECT_THROW(run_op("Concat", {in(a), in(iota(DType::kF32, {3, 3}))}, {{"axis", int64_t{1}}}),
               ModelError);
  EXPECT_THROW(run_op("Concat", {in(a), in(iota(DType::kI32, {2, 3}))}, {{"axis", int64_t{0}}}),
               ModelError);
  EXPECT_THROW(run_op("Concat", {in(a), in(a)}), ModelError);  // axis is required
}

TEST(Split, EqualDefault) {
  auto ys = run_op("Split", {in(iota(DType::kF32, {6}))}, {}, 3);
  EXPECT_EQ(values(ys[0]), (std::vector<double>{0, 1}));
  EXPECT_EQ(values(ys[2]), (std::vector<double>{4, 5}));
  EXPECT_THROW(run_op("Split", {in(iota(DType::kF32, {7}))}, {}, 3), ModelError);
}

TEST(Split, SizesAsInputOrAttributeAlongAxis1) {
  Tensor x = iota(DType::kI64, {2, 6});
  for (bool as_input : {true, false}) {
    auto ys = as_input ? run_op("Split", {in(x), constant(ints({2, 4}))}, {{"axis", int64_t{1}}}, 2)
                       : run_op("Split", {in(x)},
                                {{"axis", int64_t{1}}, {"split", std::vector<int64_t>{2, 4}}}, 2);
    EXPECT_EQ(ys[0].to_i64(), (std::vector<int64_t>{0, 1, 6, 7}));
    EXPECT_EQ(ys[1].to_i64(), (std::vector<int64_t>{2, 3, 4, 5, 8, 9, 10, 11}));
  }
  EXPECT_THROW(run_op("Split", {in(x), constant(ints({2, 3}))}, {{"axis", int64_t{1}}}, 2),
               ModelError);
}

TEST(Split, NumOutputsUnevenLastChunkSmaller) {
  // Opset 18: 5 into 3 -> ceil(5/3) = 2: sizes 2, 2, 1.
  auto ys = run_op("Split", {in(iota(DType::kBF16, {5, 2}))}, {{"num_outputs", int64_t{3}}}, 3);
  EXPECT_EQ(ys[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(ys[2].shape(), (Shape{1, 2}));
  EXPECT_EQ(values(ys[2]), (std::vector<double>{8, 9}));
  EXPECT_THROW(run_op("Split", {in(iota(DType::kF32, {5}))}, {{"num_outputs", int64_t{2}}}, 3),
               ModelError);
}

TEST(Split, ZeroSizeParts) {
  auto ys = run_op("Split", {in(Tensor(DType::kF32, {0})), constant(ints({0, 0, 0}))}, {}, 3);
  for (const auto& y : ys) EXPECT_EQ(y.shape(), (Shape{0}));
}

TEST(Slice, NegativeStepsAcrossAxes) {
  // ONNX test_slice_neg_steps: y[i, j, k] = x[19 - i, 9 - 3j, 4 - 2k].
  Tensor x = iota(DType::kF32, {20, 10, 5});
  auto y = run_op("Slice", {in(x), constant(ints({20, 10, 4})), constant(ints({0, 0, 1})),
                            constant(ints({0, 1, 2})), constant(ints({-1, -3, -2}))})[0];
  ASSERT_EQ(y.shape(), (Shape{19, 3, 2}));
  for (int64_t i = 0; i < 19; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 2; ++k)
        ASSERT_EQ(y.at((i * 3 + j) * 2 + k), x.at((19 - i) * 50 + (9 - 3 * j) * 5 + (4 - 2 * k)));
}

TEST(Slice, ClampingAndDefaults) {
  const int64_t kMin = std::numeric_limits<int64_t>::min(),
                kMax = std::numeric_limits<int64_t>::max();
  Tensor x = iota(DType::kI32, {5});
  auto slice = [&](std::vector<int64_t> s, std::vector<int64_t> e, std::vector<int64_t> st) {
    return run_op("Slice",
                  {in(x), constant(ints(s)), constant(ints(e)), absent(), constant(ints(st))})[0]
        .to_i64();
  };
  EXPECT_EQ(slice({-1}, {kMin}, {-1}), (std::vector<int64_t>{4, 3, 2, 1, 0}));
  EXPECT_EQ(slice({0}, {kMax}, {2}), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(slice({1000}, {1000}, {1}), (std::vector<int64_t>{}));
  EXPECT_EQ(slice({-100}, {-1}, {1}), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(slice({3}, {1}, {1}), (std::vector<int64_t>{}));
  EXPECT_EQ(slice({10}, {-10}, {-2}), (std::vector<int64_t>{4, 2, 0}));
  EXPECT_THROW(slice({0}, {5}, {0}), ModelError);
  // Default axes and steps, i32 bounds, negative axes.
  Tensor z = iota(DType::kF16, {4, 6});
  Tensor s32(DType::kI32, {1}), e32(DType::kI32, {1});
  *s32.data<int32_t>() = 2;
  *e32.data<int32_t>() = 5;
  auto y = run_op("Slice", {in(z), constant(s32), constant(e32), constant(ints({-1}))})[0];
  EXPECT_EQ(y.shape(), (Shape{4, 3}));
  EXPECT_EQ(values(y), doubles({2, 3, 4, 8, 9, 10, 14, 15, 16, 20, 21, 22}));
  EXPECT_THROW(run_op("Slice", {in(z), constant(ints({0, 0})), constant(ints({1, 1})),
                                constant(ints({1, -1}))}),
               ModelError);  // repeated axis
}

TEST(Gather, NegativeI32IndicesAlongAxis1) {
  Tensor x = iota(DType::kF32, {3, 4});
  Tensor idx(DType::kI32, {2, 2});
  const int32_t raw[] = {-1, 0, 2, 2};
  std::memcpy(idx.raw(), raw, sizeof(raw));
  auto y = run_op("Gather", {in(x), in(idx)}, {{"axis", int64_t{1}}})[0];
  ASSERT_EQ(y.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(values(y), doubles({3, 0, 2, 2, 7, 4, 6, 6, 11, 8, 10, 10}));
}

TEST(Gather, RowsOfEveryDtypeAndScalarIndex) {
  for (DType t : kAll) {
    Tensor x = iota(t, {5, 3});
    auto y = run_op("Gather", {in(x), in(ints({4, -5, 1}))})[0];
    ASSERT_EQ(y.shape(), (Shape{3, 3}));
    for (int64_t k = 0; k < 3; ++k) {
      EXPECT_EQ(y.at(k), x.at(12 + k)) << ir::dtype_name(t);
      EXPECT_EQ(y.at(3 + k), x.at(k)) << ir::dtype_name(t);
      EXPECT_EQ(y.at(6 + k), x.at(3 + k)) << ir::dtype_name(t);
    }
  }
  auto s = run_op("Gather", {in(iota(DType::kI64, {5, 3})), in(Tensor::from_i64({2}, {}))})[0];
  EXPECT_EQ(s.shape(), (Shape{3}));
  EXPECT_EQ(s.to_i64(), (std::vector<int64_t>{6, 7, 8}));
}

TEST(Gather, OutOfRangeIndexIsARuntimeFault) {
  EXPECT_THROW(run_op("Gather", {in(iota(DType::kF32, {5})), in(ints({5}))}), RuntimeFault);
  EXPECT_THROW(run_op("Gather", {in(iota(DType::kF32, {5})), in(ints({-6}))}), RuntimeFault);
  EXPECT_THROW(run_op("Gather", {in(iota(DType::kF32, {5})), in(iota(DType::kF32, {1}))}),
               ModelError);
}

TEST(Pad, ConstantWithValueAndNegativeCrop) {
  Tensor x = iota(DType::kF32, {2, 3});
  auto y = run_op("Pad", {in(x), constant(ints({0, 1, 1, 2})), in(Tensor::scalar_f32(1.5f))})[0];
  ASSERT_EQ(y.shape(), (Shape{3, 6}));
  const double p = 1.5;
  EXPECT_EQ(values(y), (std::vector<double>{p, 0, 1, 2, p, p, p, 3, 4, 5, p, p, p, p, p, p, p, p}));
  // Negative begin crops; default constant 0.
  auto c = run_op("Pad", {in(iota(DType::kI64, {3}, 1)), constant(ints({-1, 1}))})[0];
  EXPECT_EQ(c.to_i64(), (std::vector<int64_t>{2, 3, 0}));
}

TEST(Pad, ReflectEdgeWrapMatchNumpy) {
  Tensor x = iota(DType::kI32, {3, 4});
  auto pad = [&](const char* mode, std::vector<int64_t> pads) {
    return values(run_op("Pad", {in(x), constant(ints(pads))}, {{"mode", std::string(mode)}})[0]);
  };
  // np.pad(np.arange(12).reshape(3, 4), ((1, 2), (2, 1)), mode)
  EXPECT_EQ(pad("reflect", {1, 2, 2, 1}),
            doubles({6,  5, 4, 5, 6,  7,  6,  2, 1, 0, 1, 2, 3, 2, 6, 5, 4, 5, 6, 7, 6,
                     10, 9, 8, 9, 10, 11, 10, 6, 5, 4, 5, 6, 7, 6, 2, 1, 0, 1, 2, 3, 2}));
  EXPECT_EQ(pad("edge", {1, 2, 2, 1}),
            doubles({0, 0, 0, 1, 2,  3,  3,  0, 0, 0, 1, 2,  3,  3,  4, 4, 4, 5, 6,  7,  7,
                     8, 8, 8, 9, 10, 11, 11, 8, 8, 8, 9, 10, 11, 11, 8, 8, 8, 9, 10, 11, 11}));
  // np.pad(..., ((0, 1), (3, 0)), "wrap")
  EXPECT_EQ(pad("wrap", {0, 3, 1, 0}), doubles({1, 2,  3,  0, 1, 2,  3,  5, 6, 7, 4, 5, 6, 7,
                                                9, 10, 11, 8, 9, 10, 11, 1, 2, 3, 0, 1, 2, 3}));
  // Pads wider than the axis reflect repeatedly: np.pad([1, 2, 3], (5, 0), "reflect").
  auto r = run_op("Pad", {in(iota(DType::kI64, {3}, 1)), constant(ints({5, 0}))},
                  {{"mode", std::string("reflect")}})[0];
  EXPECT_EQ(r.to_i64(), (std::vector<int64_t>{2, 1, 2, 3, 2, 1, 2, 3}));
}

TEST(Pad, AxesInputAndEveryDtype) {
  for (DType t : kAll) {
    Tensor x = iota(t, {2, 3});
    auto y = run_op("Pad", {in(x), constant(ints({1, 1})), absent(), constant(ints({-1}))},
                    {{"mode", std::string("edge")}})[0];
    ASSERT_EQ(y.shape(), (Shape{2, 5})) << ir::dtype_name(t);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 5; ++j)
        EXPECT_EQ(y.at(i * 5 + j), x.at(i * 3 + std::clamp<int64_t>(j - 1, 0, 2)))
            << ir::dtype_name(t);
  }
}

TEST(Pad, RejectsBadPadsAndModes) {
  Tensor x = iota(DType::kF32, {2, 3});
  EXPECT_THROW(run_op("Pad", {in(x), constant(ints({1, 1}))}), ModelError);
  EXPECT_THROW(run_op("Pad", {in(x), constant(ints({0, -4, 0, 0}))}), ModelError);
  EXPECT_THROW(run_op("Pad", {in(x), constant(ints({0, 0, 0, 0}))}, {{"mode", std::string("x")}}),
               UnsupportedOp);
  EXPECT_THROW(run_op("Pad", {in(x), in(ints({0, 0, 0, 0}))}), ModelError);
}

}  // namespace
}  // namespace pipetrain::test
