// ReduceMean / ReduceSum / ReduceMax kernels and their shape rule; expected
// values are numpy's on x[i] = (i % 7) * 0.5 - 1.5 of shape (2, 3, 4).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/executor/op_test_util.h"
#include "tests/executor/tensor_fill.h"

namespace pipetrain {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;
using test::constant;
using test::in;
using test::pattern;
using test::run_op;
using test::values;

Tensor axes(std::vector<int64_t> a) {
  const int64_t n = static_cast<int64_t>(a.size());
  return Tensor::from_i64(a, {n});
}
std::map<std::string, ir::Attribute> keep(int64_t k) {
  return {{"keepdims", k}};
}

TEST(ReduceSum, AxesInputKeepdimsAndNegativeAxes) {
  auto y = run_op("ReduceSum", {in(pattern({2, 3, 4})), constant(axes({1}))}, keep(0))[0];
  ASSERT_EQ(y.shape(), (Shape{2, 4}));
  EXPECT_EQ(values(y), (std::vector<double>{-2.0, -0.5, 1.0, -1.0, 2.0, 0.0, -2.0, -0.5}));
  y = run_op("ReduceSum", {in(pattern({2, 3, 4})), constant(axes({-2}))})[0];
  ASSERT_EQ(y.shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(y.at(2), 1.0);
  y = run_op("ReduceSum", {in(pattern({2, 3, 4}))})[0];  // no axes: everything
  ASSERT_EQ(y.shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(y.at(0), -3.0);
}

TEST(ReduceSum, EmptyAxesNoopOrAll) {
  // An empty axes input needs no constant value: its shape says it is empty.
  auto y = run_op("ReduceSum", {in(pattern({2, 3})), in(axes({}))},
                  {{"noop_with_empty_axes", int64_t{1}}})[0];
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(y), values(pattern({2, 3})));
  y = run_op("ReduceSum", {in(pattern({2, 3})), in(axes({}))}, keep(0))[0];
  EXPECT_EQ(y.shape(), (Shape{}));
  EXPECT_EQ(y.at(0), -1.5 - 1 - 0.5 + 0 + 0.5 + 1);
}

TEST(ReduceSum, IntegersAndLongRows) {
  auto y =
      run_op("ReduceSum", {in(Tensor::from_i64({1, 2, 3, 4, 5, 6}, {2, 3})), constant(axes({0}))},
             keep(0))[0];
  ASSERT_EQ(y.dtype(), DType::kI64);
  EXPECT_EQ(values(y), (std::vector<double>{5, 7, 9}));
  // 100003 values of 0.1f: the sum (accumulated in double) is exact to f32 rounding.
  Tensor x(DType::kF32, {100003});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.1f;
  auto s = run_op("ReduceSum", {in(x)}, keep(0))[0];
  EXPECT_EQ(s.at(0), static_cast<float>(100003 * static_cast<double>(0.1f)));
  auto again = run_op("ReduceSum", {in(x)}, keep(0))[0];
  EXPECT_EQ(s.at(0), again.at(0));
}

TEST(ReduceMean, AttributeAxesNonContiguous) {
  auto y = run_op("ReduceMean", {in(pattern({2, 3, 4}))},
                  {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t{0}}})[0];
  ASSERT_EQ(y.shape(), (Shape{3}));
  EXPECT_EQ(values(y), (std::vector<double>{-0.375, 0.3125, -0.3125}));
  // Opset 18 form: axes as an input.
  auto z = run_op("ReduceMean", {in(pattern({2, 3, 4})), constant(axes({2, 0}))}, keep(0))[0];
  EXPECT_EQ(values(z), values(y));
}

TEST(ReduceMax, LastAxisIntegersAndNan) {
  auto y = run_op("ReduceMax", {in(pattern({2, 3, 4}))}, {{"axes", std::vector<int64_t>{-1}}})[0];
  ASSERT_EQ(y.shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(values(y), (std::vector<double>{0.0, 1.5, 0.5, 1.5, 1.0, 1.5}));
  auto yi =
      run_op("ReduceMax", {in(Tensor::from_i64({-5, -7, -1, -9}, {2, 2})), constant(axes({1}))},
             keep(0))[0];
  EXPECT_EQ(values(yi), (std::vector<double>{-5, -1}));
  Tensor x = Tensor::from_f32({1, std::nanf(""), 3, 2}, {4});
  EXPECT_TRUE(std::isnan(run_op("ReduceMax", {in(x)}, keep(0))[0].at(0)));
}

TEST(ReduceSchema, BadAxesAreModelErrors) {
  EXPECT_THROW(run_op("ReduceSum", {in(pattern({2, 3})), constant(axes({0, -2}))}), ModelError);
  EXPECT_THROW(run_op("ReduceSum", {in(pattern({2, 3})), constant(axes({2}))}), ModelError);
  EXPECT_THROW(run_op("ReduceMax", {in(pattern({2, 3})), constant(axes({0}))},
                      {{"axes", std::vector<int64_t>{0}}}),
               ModelError);
  try {
    run_op("ReduceSum", {in(pattern({2, 3})), in(axes({1}))});  // not a constant
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("constant"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_op("ReduceMean", {in(Tensor::from_i64({1, 2}, {2}))}), UnsupportedOp);
}

}  // namespace
}  // namespace pipetrain
