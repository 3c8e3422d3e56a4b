#include "ir/ops/data_movement.h"

#include <gtest/gtest.h>

#include <limits>

namespace pipetrain::ir {
namespace {

TEST(ResolveSlice, ClampsPerOnnxAndFillsUntouchedAxes) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  SliceSpec s = resolve_slice({20, 10, 5}, {20, -1}, {0, kMin}, {0, -1}, {-1, -2});
  EXPECT_EQ(s.out, (Shape{19, 10, 3}));
  EXPECT_EQ(s.start, (std::vector<int64_t>{19, 0, 4}));
  EXPECT_EQ(s.step, (std::vector<int64_t>{-1, 1, -2}));
  EXPECT_EQ(resolve_slice({0}, {0}, {-1}, {}, {-1}).out, (Shape{0}));
  EXPECT_THROW(resolve_slice({4}, {0}, {1}, {1}, {}), ModelError);
  EXPECT_THROW(resolve_slice({4}, {0, 0}, {1}, {}, {}), ModelError);
}

TEST(PadSourceIndex, ModesMatchNumpy) {
  // n = 3; p from -5 to 7.
  std::vector<int64_t> reflect, edge, wrap, constant;
  for (int64_t p = -5; p <= 7; ++p) {
    reflect.push_back(pad_source_index(p, 3, PadMode::kReflect));
    edge.push_back(pad_source_index(p, 3, PadMode::kEdge));
    wrap.push_back(pad_source_index(p, 3, PadMode::kWrap));
    constant.push_back(pad_source_index(p, 3, PadMode::kConstant));
  }
  EXPECT_EQ(reflect, (std::vector<int64_t>{1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1}));
  EXPECT_EQ(edge, (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(wrap, (std::vector<int64_t>{1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1}));
  EXPECT_EQ(constant, (std::vector<int64_t>{-1, -1, -1, -1, -1, 0, 1, 2, -1, -1, -1, -1, -1}));
  EXPECT_EQ(pad_source_index(-2, 1, PadMode::kReflect), 0);
}

TEST(ResolvePads, AxesSubsetAndErrors) {
  PadSpec s = resolve_pads({2, 3, 4}, {1, 2, 3, 4}, {-1, 0}, PadMode::kConstant);
  EXPECT_EQ(s.out, (Shape{2 + 2 + 4, 3, 4 + 1 + 3}));
  EXPECT_EQ(s.begin, (std::vector<int64_t>{2, 0, 1}));
  EXPECT_THROW(resolve_pads({2}, {1}, {}, PadMode::kConstant), ModelError);
  EXPECT_THROW(resolve_pads({0}, {1, 0}, {}, PadMode::kEdge), ModelError);
  EXPECT_THROW(pad_mode_from_string("mirror"), UnsupportedOp);
}

TEST(ShapeOpRange, NegativeAndClamped) {
  EXPECT_EQ(shape_op_range(3, -10, 10), (std::pair<int64_t, int64_t>{0, 3}));
  EXPECT_EQ(shape_op_range(3, 1, -1), (std::pair<int64_t, int64_t>{1, 2}));
  EXPECT_EQ(shape_op_range(3, 2, 1), (std::pair<int64_t, int64_t>{2, 2}));
}

}  // namespace
}  // namespace pipetrain::ir
