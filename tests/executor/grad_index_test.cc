// GatherGrad and SliceGrad: hand-computed cases, and the adjoint identity
// <dY, op(X)> = <op_grad(dY), X> against our forward Gather / Slice (both are
// linear, so this is their exact Jacobian-transpose check).
#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/ops/data_movement.h"
#include "tests/executor/nn_test_util.h"

namespace pipetrain::test {
namespace {

using ir::DType;
using ir::Shape;
using ir::Tensor;
using Ints = std::vector<int64_t>;

Tensor gather_grad(const Tensor& dy, const Tensor& idx, const Shape& data, int64_t axis) {
  return run_op("GatherGrad", {in(dy), in(idx)},
                {{"axis", axis}, {"data_shape", Ints(data.begin(), data.end())}})[0];
}

Tensor i32(const Ints& v, Shape s) {
  Tensor t(DType::kI32, std::move(s));
  for (size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
  return t;
}

/// sum a[i] b[i] in double and sum |a[i] b[i]| (for a tolerance).
std::pair<double, double> dot(const Tensor& a, const Tensor& b) {
  double s = 0, m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    s += a.at(i) * b.at(i);
    m += std::abs(a.at(i) * b.at(i));
  }
  return {s, m};
}

TEST(GatherGrad, RepeatedAndNegativeIndicesAccumulate) {
  // data (5), indices {0, 3, -1, 3, 0}: rows 0 and 3 twice, -1 is row 4.
  Tensor dy = Tensor::from_f32({1, 2, 3, 4, 5}, {5});
  Tensor idx = Tensor::from_i64({0, 3, -1, 3, 0}, {5});
  expect_close(gather_grad(dy, idx, {5}, 0), {6, 0, 0, 6, 3}, 0, 0);
  expect_close(gather_grad(dy, i32({0, 3, -1, 3, 0}, {5}), {5}, 0), {6, 0, 0, 6, 3}, 0, 0);
}

TEST(GatherGrad, Axis1WithMatrixIndicesHandComputed) {
  // data (2, 3), axis 1, indices (2, 2) = {{2, 0}, {2, -3}}: dY (2, 2, 2);
  // ddata[r, c] = sum of dY[r, i, j] with indices[i, j] = c.
  Tensor dy = Tensor::from_f32({1, 2, 3, 4, 10, 20, 30, 40}, {2, 2, 2});
  Tensor idx = Tensor::from_i64({2, 0, 2, -3}, {2, 2});
  expect_close(gather_grad(dy, idx, {2, 3}, 1), {2 + 4, 0, 1 + 3, 20 + 40, 0, 10 + 30}, 0, 0);
  expect_close(gather_grad(dy, idx, {2, 3}, -1), {2 + 4, 0, 1 + 3, 20 + 40, 0, 10 + 30}, 0, 0);
}

TEST(GatherGrad, IsTheAdjointOfGatherOnEveryAxis) {
  const Shape data = {3, 4, 2, 5};
  Tensor x = wave(data, 0.3);
  for (int64_t axis = -4; axis < 4; ++axis) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const int64_t dim = data[static_cast<size_t>(axis < 0 ? axis + 4 : axis)];
    // (2, 3) indices with repeats and negatives, all within [-dim, dim).
    Ints v = {0, dim - 1, -1, 1 % dim, -dim, 0};
    Tensor idx = Tensor::from_i64(v, {2, 3});
    Tensor y = run_op("Gather", {in(x), in(idx)}, {{"axis", axis}})[0];
    Tensor dy = wave(y.shape(), 1.1);
    Tensor dx = gather_grad(dy, idx, data, axis);
    auto [lhs, scale] = dot(dy, y);
    EXPECT_NEAR(lhs, dot(dx, x).first, 1e-6 * scale);
  }
}

TEST(GatherGrad, IndexOutOfRangeIsARuntimeFault) {
  Tensor dy = Tensor::from_f32({1, 2}, {2});
  EXPECT_THROW(gather_grad(dy, Tensor::from_i64({0, 5}, {2}), {5}, 0), RuntimeFault);
  EXPECT_THROW(gather_grad(dy, Tensor::from_i64({0, -6}, {2}), {5}, 0), RuntimeFault);
}

Tensor slice_grad(const Tensor& dy, const Shape& x, const Ints& starts, const Ints& steps) {
  return run_op(
      "SliceGrad", {in(dy)},
      {{"input_shape", Ints(x.begin(), x.end())}, {"starts", starts}, {"steps", steps}})[0];
}

TEST(SliceGrad, PositiveAndNegativeStepsHandComputed) {
  Tensor dy = Tensor::from_f32({1, 2, 3}, {3});
  // x[1:6:2] of (6): positions 1, 3, 5.
  expect_close(slice_grad(dy, {6}, {1}, {2}), {0, 1, 0, 2, 0, 3}, 0, 0);
  // x[4::-2]: positions 4, 2, 0.
  expect_close(slice_grad(dy, {6}, {4}, {-2}), {3, 0, 2, 0, 1, 0}, 0, 0);
  // (2, 3) -> rows 1, columns 2, 1 (step -1): dY (1, 2).
  expect_close(slice_grad(Tensor::from_f32({7, 8}, {1, 2}), {2, 3}, {1, 2}, {1, -1}),
               {0, 0, 0, 0, 8, 7}, 0, 0);
  // An empty slice leaves zeros.
  expect_close(slice_grad(Tensor(DType::kF32, {0}), {4}, {0}, {1}), {0, 0, 0, 0}, 0, 0);
}

TEST(SliceGrad, IsTheAdjointOfSliceRank1To4) {
  struct Case {
    Shape x;
    Ints starts, ends, axes, steps;
  };
  const std::vector<Case> cases = {
      {{11}, {-2}, {0}, {0}, {-3}},
      {{5, 7}, {1, 6}, {100, -8}, {0, 1}, {2, -2}},
      {{4, 3, 6}, {0, 1}, {-1, 5}, {2, 0}, {1, 1}},
      {{3, 4, 5, 6}, {2, 0, -1, 1}, {-100, 4, 0, 6}, {0, 1, 2, 3}, {-1, 3, -2, 2}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ir::shape_str(c.x));
    Tensor x = wave(c.x, 0.2);
    Tensor y =
        run_op("Slice", {in(x), constant(Tensor::from_i64(c.starts, {(int64_t)c.starts.size()})),
                         constant(Tensor::from_i64(c.ends, {(int64_t)c.ends.size()})),
                         constant(Tensor::from_i64(c.axes, {(int64_t)c.axes.size()})),
                         constant(Tensor::from_i64(c.steps, {(int64_t)c.steps.size()}))})[0];
    ASSERT_GT(y.numel(), 0);
    // autodiff passes the slice resolved over the full rank.
    const ir::SliceSpec spec = ir::resolve_slice(c.x, c.starts, c.ends, c.axes, c.steps);
    Tensor dy = wave(y.shape(), 0.9);
    Tensor dx = slice_grad(dy, c.x, spec.start, spec.step);
    auto [lhs, scale] = dot(dy, y);
    EXPECT_NEAR(lhs, dot(dx, x).first, 1e-6 * scale);
    // Every element of dY lands somewhere distinct: the sums agree too.
    double sy = 0, sx = 0;
    for (int64_t i = 0; i < dy.numel(); ++i) sy += dy.at(i);
    for (int64_t i = 0; i < dx.numel(); ++i) sx += dx.at(i);
    EXPECT_NEAR(sy, sx, 1e-5);
  }
}

TEST(SliceGrad, SliceOutsideTheInputIsRefused) {
  EXPECT_THROW(slice_grad(Tensor::from_f32({1, 2, 3}, {3}), {6}, {2}, {2}), ModelError);
}

}  // namespace
}  // namespace pipetrain::test
