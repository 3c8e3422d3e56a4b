// Elementwise kernels and schemas; expected values are hand-computed or
// numpy's (pasted). Includes a randomised check of the broadcast planner
// against a naive index computation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "executor/cpu/kernels/broadcast.h"
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

Tensor f32(std::vector<float> v, Shape s) {
  return Tensor::from_f32(v, std::move(s));
}
Tensor i64(std::vector<int64_t> v, Shape s) {
  return Tensor::from_i64(v, std::move(s));
}
Tensor i32(std::vector<int32_t> v, Shape s) {
  Tensor t(DType::kI32, std::move(s));
  std::memcpy(t.raw(), v.data(), v.size() * 4);
  return t;
}
Tensor boolean(std::vector<uint8_t> v, Shape s) {
  Tensor t(DType::kBool, std::move(s));
  std::memcpy(t.raw(), v.data(), v.size());
  return t;
}

TEST(Broadcast, PlanMatchesNaiveIndexing) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    const size_t rank = rng() % 5;
    Shape out(rank), sa, sb;
    for (auto& d : out) d = 1 + rng() % 4;
    auto pick = [&](Shape& s) {
      const size_t r = rng() % (rank + 1);
      for (size_t i = rank - r; i < rank; ++i) s.push_back(rng() % 2 ? out[i] : 1);
    };
    pick(sa);
    pick(sb);
    const Shape so = ir::broadcast_shapes(sa, sb);
    std::vector<float> a(static_cast<size_t>(ir::numel(sa))), b(static_cast<size_t>(ir::numel(sb)));
    for (auto& v : a) v = static_cast<float>(rng() % 100);
    for (auto& v : b) v = static_cast<float>(rng() % 100);
    std::vector<float> y(static_cast<size_t>(ir::numel(so)));
    exec::cpu::binary_broadcast(a.data(), sa, b.data(), sb, y.data(), so,
                                [](float p, float q) { return p * 1000 + q; });
    // Naive: unravel each output index, clamp broadcast dims to 0.
    auto offset = [&](const Shape& s, const std::vector<int64_t>& idx) {
      int64_t off = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        const size_t o = i + so.size() - s.size();
        off = off * s[i] + (s[i] == 1 ? 0 : idx[o]);
      }
      return off;
    };
    for (int64_t flat = 0; flat < ir::numel(so); ++flat) {
      std::vector<int64_t> idx(so.size());
      int64_t r = flat;
      for (size_t i = so.size(); i-- > 0;) {
        idx[i] = r % so[i];
        r /= so[i];
      }
      const float want =
          a[static_cast<size_t>(offset(sa, idx))] * 1000 + b[static_cast<size_t>(offset(sb, idx))];
      ASSERT_EQ(y[static_cast<size_t>(flat)], want)
          << "iter " << iter << " " << ir::shape_str(sa) << " x " << ir::shape_str(sb);
    }
  }
}

TEST(Add, SameShapeBiasAndMiddleBroadcast) {
  auto y = run_op("Add", {in(f32({1, 2, 3, 4}, {2, 2})), in(f32({10, 20, 30, 40}, {2, 2}))})[0];
  EXPECT_EQ(values(y), (std::vector<double>{11, 22, 33, 44}));
  y = run_op("Add", {in(pattern({3, 4, 5})), in(f32({0, 100, 200, 300, 400}, {5}))})[0];
  ASSERT_EQ(y.shape(), (Shape{3, 4, 5}));
  EXPECT_FLOAT_EQ(y.at(0), -1.5f);
  EXPECT_FLOAT_EQ(y.at(59), 400 + (59 % 7) * 0.5f - 1.5f);
  // (2, 1, 3) + (4, 1) -> (2, 4, 3): y[i, j, k] = a[i, 0, k] + b[j, 0]
  y = run_op("Add", {in(f32({0, 1, 2, 3, 4, 5}, {2, 1, 3})), in(f32({0, 10, 20, 30}, {4, 1}))})[0];
  ASSERT_EQ(y.shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(y.at(1 * 12 + 2 * 3 + 1), 4 + 20);
  // scalar on the left
  y = run_op("Sub", {in(f32({10}, {})), in(f32({1, 2, 3}, {3}))})[0];
  EXPECT_EQ(values(y), (std::vector<double>{9, 8, 7}));
}

TEST(Arith, IntegerDivTruncatesAndNeverTraps) {
  auto y = run_op("Div", {in(i64({7, -7, 7, -7, 5, std::numeric_limits<int64_t>::min()}, {6})),
                          in(i64({2, 2, -2, -2, 0, -1}, {6}))})[0];
  ASSERT_EQ(y.dtype(), DType::kI64);
  const int64_t* p = y.data<int64_t>();
  EXPECT_EQ(p[0], 3);
  EXPECT_EQ(p[1], -3);
  EXPECT_EQ(p[2], -3);
  EXPECT_EQ(p[3], 3);
  EXPECT_EQ(p[4], 0);                                    // x / 0 is defined as 0
  EXPECT_EQ(p[5], std::numeric_limits<int64_t>::min());  // wraps
  y = run_op("Mul", {in(i32({3, -4}, {2})), in(i32({5}, {1}))})[0];
  EXPECT_EQ(values(y), (std::vector<double>{15, -20}));
  y = run_op("Div", {in(f32({1, -3}, {2})), in(f32({4, 2}, {2}))})[0];
  EXPECT_EQ(values(y), (std::vector<double>{0.25, -1.5}));
}

TEST(Pow, FloatAndIntegerExponents) {
  auto y = run_op("Pow", {in(f32({2, 4, -2}, {3})), in(f32({3, 0.5f, 2}, {3}))})[0];
  EXPECT_EQ(values(y), (std::vector<double>{8, 2, 4}));
  y = run_op("Pow", {in(f32({1.5f, 2, 3}, {3})), in(i64({2, -1, 3}, {3}))})[0];
  ASSERT_EQ(y.dtype(), DType::kF32);
  EXPECT_EQ(values(y), (std::vector<double>{2.25, 0.5, 27}));
  y = run_op("Pow", {in(i64({2, -3, 5}, {3})), in(i64({10, 3, 0}, {3}))})[0];
  ASSERT_EQ(y.dtype(), DType::kI64);
  EXPECT_EQ(values(y), (std::vector<double>{1024, -27, 1}));
  // numpy: np.power(int32, float32) then astype(int32) truncates
  y = run_op("Pow", {in(i32({2, 3, 10}, {3})), in(f32({0.5f, 2.5f, -1}, {3}))})[0];
  ASSERT_EQ(y.dtype(), DType::kI32);
  EXPECT_EQ(values(y), (std::vector<double>{1, 15, 0}));
  y = run_op("Pow", {in(pattern({2, 3})), in(f32({2}, {}))})[0];  // scalar exponent
  EXPECT_FLOAT_EQ(y.at(0), 2.25f);
}

TEST(Compare, OutputsBool) {
  auto a = f32({1, 2, 3}, {3});
  auto b = f32({2}, {1});
  auto eq = run_op("Equal", {in(a), in(b)})[0];
  auto lt = run_op("Less", {in(a), in(b)})[0];
  auto gt = run_op("Greater", {in(a), in(b)})[0];
  ASSERT_EQ(eq.dtype(), DType::kBool);
  EXPECT_EQ(values(eq), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ(values(lt), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(values(gt), (std::vector<double>{0, 0, 1}));
  auto beq = run_op("Equal", {in(boolean({1, 0}, {2})), in(boolean({1, 1}, {2}))})[0];
  EXPECT_EQ(values(beq), (std::vector<double>{1, 0}));
  auto ieq = run_op("Equal", {in(i64({4, 5}, {2})), in(i64({5}, {}))})[0];
  EXPECT_EQ(values(ieq), (std::vector<double>{0, 1}));
}

TEST(MaxMin, VariadicWithBroadcastAndNan) {
  const float nan = std::nanf("");
  auto y =
      run_op("Max", {in(f32({1, 5, 3}, {3})), in(f32({4}, {1})), in(f32({0, 0, nan}, {3}))})[0];
  EXPECT_EQ(y.at(0), 4);
  EXPECT_EQ(y.at(1), 5);
  EXPECT_TRUE(std::isnan(y.at(2)));
  y = run_op("Min", {in(f32({1, 5}, {2, 1})), in(f32({2, 0, 9}, {3}))})[0];
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(y), (std::vector<double>{1, 0, 1, 2, 0, 5}));
  y = run_op("Max", {in(i64({-1, 7}, {2}))})[0];
  EXPECT_EQ(values(y), (std::vector<double>{-1, 7}));
  y = run_op("Min", {in(i32({3, -2}, {2})), in(i32({0, 0}, {2}))})[0];
  EXPECT_EQ(values(y), (std::vector<double>{0, -2}));
}

TEST(Unary, MathMatchesLibm) {
  auto x = f32({0.25f, 1, 4}, {3});
  EXPECT_EQ(values(run_op("Sqrt", {in(x)})[0]), (std::vector<double>{0.5, 1, 2}));
  EXPECT_EQ(values(run_op("Reciprocal", {in(x)})[0]), (std::vector<double>{4, 1, 0.25}));
  EXPECT_EQ(values(run_op("Neg", {in(x)})[0]), (std::vector<double>{-0.25, -1, -4}));
  EXPECT_FLOAT_EQ(run_op("Exp", {in(x)})[0].at(1), std::exp(1.0f));
  EXPECT_FLOAT_EQ(run_op("Log", {in(x)})[0].at(2), std::log(4.0f));
  // torch.erf([-3, -0.5, 0.5])
  auto e = run_op("Erf", {in(f32({-3, -0.5f, 0.5f}, {3}))})[0];
  EXPECT_NEAR(e.at(0), -0.9999778866767883, 1e-7);
  EXPECT_NEAR(e.at(1), -0.5204998850822449, 1e-7);
  EXPECT_NEAR(e.at(2), 0.5204998850822449, 1e-7);
  EXPECT_EQ(values(run_op("Abs", {in(i32({-3, 2}, {2}))})[0]), (std::vector<double>{3, 2}));
  EXPECT_EQ(values(run_op("Neg", {in(i64({-3, 2}, {2}))})[0]), (std::vector<double>{3, -2}));
  EXPECT_EQ(values(run_op("Not", {in(boolean({1, 0}, {2}))})[0]), (std::vector<double>{0, 1}));
}

TEST(Where, ThreeWayBroadcast) {
  // cond (2, 1), x (3), y () -> (2, 3)
  auto y =
      run_op("Where", {in(boolean({1, 0}, {2, 1})), in(i64({1, 2, 3}, {3})), in(i64({-1}, {}))})[0];
  ASSERT_EQ(y.dtype(), DType::kI64);
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(y), (std::vector<double>{1, 2, 3, -1, -1, -1}));
  y = run_op("Where",
             {in(boolean({0, 1, 1}, {3})), in(f32({1, 2, 3}, {3})), in(f32({9, 9, 9}, {3}))})[0];
  EXPECT_EQ(values(y), (std::vector<double>{9, 2, 3}));
}

TEST(Cast, ConversionsRoundTruncateAndSaturate) {
  auto cast = [](Tensor x, DType to) {
    return run_op("Cast", {in(std::move(x))}, {{"to", static_cast<int64_t>(to)}})[0];
  };
  auto y = cast(f32({2.7f, -2.7f, 1e20f, std::nanf("")}, {4}), DType::kI64);
  ASSERT_EQ(y.dtype(), DType::kI64);
  EXPECT_EQ(y.data<int64_t>()[0], 2);
  EXPECT_EQ(y.data<int64_t>()[1], -2);
  EXPECT_EQ(y.data<int64_t>()[2], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(y.data<int64_t>()[3], 0);
  EXPECT_EQ(values(cast(f32({0, -0.5f, std::nanf("")}, {3}), DType::kBool)),
            (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(values(cast(boolean({1, 0}, {2}), DType::kF32)), (std::vector<double>{1, 0}));
  EXPECT_EQ(values(cast(i64({(int64_t{1} << 32) + 5, -1}, {2}), DType::kI32)),
            (std::vector<double>{5, -1}));  // wraps like numpy
  // 1 + 2^-11 is halfway between two f16 values: ties to even gives 1.
  auto h = cast(f32({1.0f + 1.0f / 2048, 65504, 3.140625f}, {3}), DType::kF16);
  ASSERT_EQ(h.dtype(), DType::kF16);
  EXPECT_EQ(values(cast(h, DType::kF32)), (std::vector<double>{1, 65504, 3.140625}));
  // bf16 rounds to nearest even (numpy-free check: 1 + 3 * 2^-9 -> 1 + 2^-7).
  auto b = cast(f32({1.0f + 3.0f / 512}, {1}), DType::kBF16);
  EXPECT_EQ(b.data<uint16_t>()[0], ir::f32_to_bf16(1.0f + 3.0f / 512));
  EXPECT_EQ(b.at(0), 1.0 + 1.0 / 128);
  EXPECT_EQ(values(cast(i32({7, -8}, {2}), DType::kI64)), (std::vector<double>{7, -8}));
}

TEST(Half, ArithmeticRunsThroughF32) {
  Tensor a(DType::kF16, {2}), b(DType::kF16, {2});
  a.data<uint16_t>()[0] = ir::f32_to_f16(1.5f);
  a.data<uint16_t>()[1] = ir::f32_to_f16(-2.0f);
  b.data<uint16_t>()[0] = ir::f32_to_f16(0.25f);
  b.data<uint16_t>()[1] = ir::f32_to_f16(3.0f);
  auto y = run_op("Add", {in(a), in(b)})[0];
  ASSERT_EQ(y.dtype(), DType::kF16);
  EXPECT_EQ(values(y), (std::vector<double>{1.75, 1}));
  auto m = run_op("Max", {in(a), in(b)})[0];
  EXPECT_EQ(values(m), (std::vector<double>{1.5, 3}));
  auto lt = run_op("Less", {in(a), in(b)})[0];
  ASSERT_EQ(lt.dtype(), DType::kBool);
  EXPECT_EQ(values(lt), (std::vector<double>{0, 1}));
}

TEST(ElementwiseSchema, ErrorsNameShapesAndDtypes) {
  try {
    run_op("Add", {in(pattern({2, 3})), in(pattern({4}))});
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 3), (4)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_op("Add", {in(pattern({2})), in(i64({1, 2}, {2}))}), ModelError);
  EXPECT_THROW(run_op("Where", {in(pattern({2})), in(pattern({2})), in(pattern({2}))}), ModelError);
  EXPECT_THROW(run_op("Not", {in(pattern({2}))}), ModelError);
  EXPECT_THROW(run_op("Cast", {in(pattern({2}))}, {{"to", int64_t{11}}}), UnsupportedOp);
  EXPECT_THROW(run_op("Cast", {in(pattern({2}))}), ModelError);
  EXPECT_THROW(run_op("Sqrt", {in(i64({4}, {1}))}), UnsupportedOp);  // no integer kernel
  // saturate (opset 19) only matters for float8: accepted.
  auto y = run_op("Cast", {in(pattern({2}))}, {{"to", int64_t{7}}, {"saturate", int64_t{1}}})[0];
  EXPECT_EQ(y.dtype(), DType::kI64);
}

}  // namespace
}  // namespace pipetrain
