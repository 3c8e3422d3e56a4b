// Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Expand, Identity, Shape,
// Constant, ConstantOfShape, Range: shape rules and CPU kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "tests/executor/op_test_util.h"
#include "tests/executor/tensor_fill.h"

namespace pipetrain::test {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;

const auto& kAll = kAllDtypes;

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

/// Naive transpose by full index arithmetic: the independent reference.
Tensor ref_transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  const Shape& in = x.shape();
  Shape out(in.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = in[static_cast<size_t>(perm[i])];
  Tensor y(x.dtype(), out);
  const size_t es = ir::dtype_size(x.dtype());
  const auto in_st = ir::strides_of(in);
  std::vector<int64_t> idx(out.size());
  for (int64_t o = 0; o < y.numel(); ++o) {
    int64_t rem = o, src = 0;
    for (size_t a = out.size(); a-- > 0;) {
      idx[a] = rem % out[a];
      rem /= out[a];
    }
    for (size_t a = 0; a < out.size(); ++a) src += idx[a] * in_st[static_cast<size_t>(perm[a])];
    std::memcpy(static_cast<char*>(y.raw()) + o * static_cast<int64_t>(es),
                static_cast<const char*>(x.raw()) + src * static_cast<int64_t>(es), es);
  }
  return y;
}

TEST(Flatten, AxesIncludingNegativeAndZero) {
  Tensor x = filled(DType::kF32, {2, 3, 4, 5});
  EXPECT_EQ(run_op("Flatten", {in(x)}, {{"axis", int64_t{0}}})[0].shape(), (Shape{1, 120}));
  EXPECT_EQ(run_op("Flatten", {in(x)})[0].shape(), (Shape{2, 60}));
  EXPECT_EQ(run_op("Flatten", {in(x)}, {{"axis", int64_t{-1}}})[0].shape(), (Shape{24, 5}));
  EXPECT_EQ(run_op("Flatten", {in(x)}, {{"axis", int64_t{4}}})[0].shape(), (Shape{120, 1}));
  EXPECT_EQ(values(run_op("Flatten", {in(x)})[0]), values(x));
  EXPECT_THROW(run_op("Flatten", {in(x)}, {{"axis", int64_t{5}}}), ModelError);
}

TEST(Reshape, ZeroCopiesMinusOneInfers) {
  Tensor x = filled(DType::kF32, {2, 3, 4});
  auto y = run_op("Reshape", {in(x), constant(ints({2, 0, 1, -1}))})[0];
  EXPECT_EQ(y.shape(), (Shape{2, 3, 1, 4}));
  EXPECT_EQ(values(y), values(x));
  EXPECT_EQ(run_op("Reshape", {in(x), constant(ints({-1, 2, 3, 4}))})[0].shape(),
            (Shape{1, 2, 3, 4}));
}

TEST(Reshape, AllowZeroKeepsZeroDims) {
  Tensor x(DType::kF32, {0, 3, 4});
  auto y = run_op("Reshape", {in(x), constant(ints({3, 4, 0}))}, {{"allowzero", int64_t{1}}})[0];
  EXPECT_EQ(y.shape(), (Shape{3, 4, 0}));
  EXPECT_THROW(run_op("Reshape", {in(x), constant(ints({-1, 0}))}, {{"allowzero", int64_t{1}}}),
               ModelError);
}

TEST(Reshape, RejectsBadShapesAndNonConstantShape) {
  Tensor x = filled(DType::kF32, {2, 3, 4});
  EXPECT_THROW(run_op("Reshape", {in(x), constant(ints({5, -1}))}), ModelError);
  EXPECT_THROW(run_op("Reshape", {in(x), constant(ints({-1, -1}))}), ModelError);
  EXPECT_THROW(run_op("Reshape", {in(x), constant(ints({7, 3}))}), ModelError);
  try {
    run_op("Reshape", {in(x), in(ints({24}))});
    FAIL() << "a fed shape must be refused";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("constant"), std::string::npos) << e.what();
  }
}

TEST(Reshape, EveryDtypeMovesBytes) {
  for (DType t : kAll) {
    Tensor x = filled(t, {4, 6});
    auto y = run_op("Reshape", {in(x), constant(ints({3, 8}))})[0];
    EXPECT_TRUE(same_bytes(y, x.reshaped({3, 8}))) << ir::dtype_name(t);
  }
}

TEST(Transpose, AllPermutationsOfRank4MatchReference) {
  Tensor x = filled(DType::kF32, {2, 3, 4, 5});
  std::vector<int64_t> perm = {0, 1, 2, 3};
  do {
    auto y = run_op("Transpose", {in(x)}, {{"perm", perm}})[0];
    EXPECT_TRUE(same_bytes(y, ref_transpose(x, perm))) << ir::shape_str(perm);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(Transpose, DefaultReversesAxes) {
  Tensor x = filled(DType::kF32, {2, 3});
  auto y = run_op("Transpose", {in(x)})[0];
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(y), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(Transpose, LargeTiledAndUnitDimsEveryDtype) {
  // 70 x 45 crosses the 32-element tiles; unit dims exercise the coalescing.
  for (DType t : kAll) {
    Tensor x = filled(t, {70, 1, 45, 3}, [](int64_t i) { return i * 7 + 1; });
    for (std::vector<int64_t> perm :
         {std::vector<int64_t>{2, 1, 0, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}}) {
      auto y = run_op("Transpose", {in(x)}, {{"perm", perm}})[0];
      EXPECT_TRUE(same_bytes(y, ref_transpose(x, perm)))
          << ir::dtype_name(t) << " " << ir::shape_str(perm);
    }
  }
}

TEST(Transpose, RejectsBadPerm) {
  Tensor x = filled(DType::kF32, {2, 3});
  EXPECT_THROW(run_op("Transpose", {in(x)}, {{"perm", std::vector<int64_t>{0, 0}}}), ModelError);
  EXPECT_THROW(run_op("Transpose", {in(x)}, {{"perm", std::vector<int64_t>{0}}}), ModelError);
}

TEST(Squeeze, AxesAsInputAttributeOrAllUnitDims) {
  Tensor x = filled(DType::kF32, {1, 3, 1, 5});
  EXPECT_EQ(run_op("Squeeze", {in(x), constant(ints({-2}))})[0].shape(), (Shape{1, 3, 5}));
  EXPECT_EQ(run_op("Squeeze", {in(x)}, {{"axes", std::vector<int64_t>{0}}})[0].shape(),
            (Shape{3, 1, 5}));
  auto y = run_op("Squeeze", {in(x)})[0];
  EXPECT_EQ(y.shape(), (Shape{3, 5}));
  EXPECT_EQ(values(y), values(x));
  EXPECT_EQ(run_op("Squeeze", {in(x), constant(ints({}))})[0].shape(), (Shape{3, 5}));
  EXPECT_THROW(run_op("Squeeze", {in(x), constant(ints({1}))}), ModelError);
}

TEST(Unsqueeze, AxesIndexTheOutputInAnyOrder) {
  Tensor x = filled(DType::kI32, {3, 4, 5});
  EXPECT_EQ(run_op("Unsqueeze", {in(x), constant(ints({5, 4, 2}))})[0].shape(),
            (Shape{3, 4, 1, 5, 1, 1}));
  EXPECT_EQ(run_op("Unsqueeze", {in(x)}, {{"axes", std::vector<int64_t>{3}}})[0].shape(),
            (Shape{3, 4, 5, 1}));
  EXPECT_EQ(run_op("Unsqueeze", {in(x), constant(ints({-1, 0}))})[0].shape(),
            (Shape{1, 3, 4, 5, 1}));
  EXPECT_THROW(run_op("Unsqueeze", {in(x), constant(ints({1, 1}))}), ModelError);
  EXPECT_THROW(run_op("Unsqueeze", {in(x)}), ModelError);
}

TEST(Expand, BidirectionalBroadcast) {
  Tensor x = Tensor::from_f32({1, 2, 3}, {3, 1});
  auto y = run_op("Expand", {in(x), constant(ints({2, 1, 4}))})[0];
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  std::vector<double> want;
  for (int r = 0; r < 2; ++r)
    for (double v : {1, 2, 3})
      for (int k = 0; k < 4; ++k) want.push_back(v);
  EXPECT_EQ(values(y), want);
  // Target smaller than the input: the input's dims win.
  EXPECT_EQ(run_op("Expand", {in(x), constant(ints({1}))})[0].shape(), (Shape{3, 1}));
  EXPECT_THROW(run_op("Expand", {in(x), constant(ints({2, 2}))}), ModelError);
}

TEST(Expand, MiddleBroadcastKeepsInnerRuns) {
  for (DType t : kAll) {
    Tensor x = filled(t, {2, 1, 3});
    auto y = run_op("Expand", {in(x), constant(ints({2, 2, 4, 3}))})[0];
    ASSERT_EQ(y.shape(), (Shape{2, 2, 4, 3}));
    for (int64_t i = 0; i < y.numel(); ++i) {
      const int64_t a = (i / 12) % 2, c = i % 3;  // (batch, a, b, c): b is broadcast
      EXPECT_EQ(y.at(i), x.at(a * 3 + c)) << ir::dtype_name(t) << " at " << i;
    }
  }
}

TEST(Identity, CopiesEveryDtype) {
  for (DType t : kAll) {
    Tensor x = filled(t, {3, 2});
    EXPECT_TRUE(same_bytes(run_op("Identity", {in(x)})[0], x)) << ir::dtype_name(t);
  }
}

TEST(Shape, StartEndClampAndNegative) {
  Tensor x(DType::kBF16, {3, 4, 5});
  auto shape = [&](std::map<std::string, ir::Attribute> a) {
    auto y = run_op("Shape", {in(x)}, std::move(a))[0];
    EXPECT_EQ(y.dtype(), DType::kI64);
    return y.to_i64();
  };
  EXPECT_EQ(shape({}), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(shape({{"start", int64_t{-10}}, {"end", int64_t{10}}}),
            (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(shape({{"start", int64_t{1}}, {"end", int64_t{-1}}}), (std::vector<int64_t>{4}));
  EXPECT_EQ(shape({{"start", int64_t{-1}}}), (std::vector<int64_t>{5}));
  EXPECT_EQ(shape({{"start", int64_t{2}}, {"end", int64_t{1}}}), (std::vector<int64_t>{}));
}

TEST(Constant, EveryAttributeForm) {
  Tensor v = filled(DType::kI32, {2, 2});
  EXPECT_TRUE(same_bytes(run_op("Constant", {}, {{"value", v}})[0], v));
  auto f = run_op("Constant", {}, {{"value_float", 2.5f}})[0];
  EXPECT_EQ(f.shape(), Shape{});
  EXPECT_EQ(f.at(0), 2.5);
  auto fs = run_op("Constant", {}, {{"value_floats", std::vector<float>{1.5f, -2.f}}})[0];
  EXPECT_EQ(values(fs), (std::vector<double>{1.5, -2}));
  auto i = run_op("Constant", {}, {{"value_int", int64_t{-7}}})[0];
  EXPECT_EQ(i.dtype(), DType::kI64);
  EXPECT_EQ(i.to_i64(), (std::vector<int64_t>{-7}));
  auto is = run_op("Constant", {}, {{"value_ints", std::vector<int64_t>{4, 5, 6}}})[0];
  EXPECT_EQ(is.shape(), (Shape{3}));
  EXPECT_EQ(is.to_i64(), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_THROW(run_op("Constant", {}), ModelError);
  EXPECT_THROW(run_op("Constant", {}, {{"value_int", int64_t{1}}, {"value_float", 1.f}}),
               ModelError);
}

TEST(ConstantOfShape, ValueAttributeOrF32Zero) {
  auto z = run_op("ConstantOfShape", {constant(ints({2, 3}))})[0];
  EXPECT_EQ(z.dtype(), DType::kF32);
  EXPECT_EQ(values(z), std::vector<double>(6, 0.0));
  Tensor seven(DType::kI32, {1});
  *seven.data<int32_t>() = 7;
  auto y = run_op("ConstantOfShape", {constant(ints({4, 1}))}, {{"value", seven}})[0];
  EXPECT_EQ(y.dtype(), DType::kI32);
  EXPECT_EQ(y.shape(), (Shape{4, 1}));
  EXPECT_EQ(values(y), std::vector<double>(4, 7.0));
  EXPECT_EQ(run_op("ConstantOfShape", {constant(ints({0}))})[0].shape(), (Shape{0}));
  EXPECT_THROW(run_op("ConstantOfShape", {in(ints({2}))}), ModelError);
}

TEST(Range, FloatAndIntegerBothDirections) {
  auto f = run_op("Range", {constant(Tensor::scalar_f32(1)), constant(Tensor::scalar_f32(5)),
                            constant(Tensor::scalar_f32(2))})[0];
  EXPECT_EQ(values(f), (std::vector<double>{1, 3}));
  auto scalar_i32 = [](int32_t v) {
    Tensor t(DType::kI32, {});
    *t.data<int32_t>() = v;
    return constant(t);
  };
  auto i = run_op("Range", {scalar_i32(10), scalar_i32(6), scalar_i32(-3)})[0];
  EXPECT_EQ(i.dtype(), DType::kI32);
  EXPECT_EQ(values(i), (std::vector<double>{10, 7}));
  auto scalar_i64 = [](int64_t v) { return constant(Tensor::from_i64({v}, {})); };
  EXPECT_EQ(run_op("Range", {scalar_i64(0), scalar_i64(7), scalar_i64(3)})[0].to_i64(),
            (std::vector<int64_t>{0, 3, 6}));
  EXPECT_EQ(run_op("Range", {scalar_i64(5), scalar_i64(1), scalar_i64(1)})[0].shape(), (Shape{0}));
  EXPECT_THROW(run_op("Range", {scalar_i64(0), scalar_i64(7), scalar_i64(0)}), ModelError);
  EXPECT_THROW(run_op("Range", {scalar_i64(0), in(Tensor::from_i64({7}, {})), scalar_i64(1)}),
               ModelError);
}

}  // namespace
}  // namespace pipetrain::test
