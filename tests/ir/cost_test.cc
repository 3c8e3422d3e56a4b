#include "ir/cost.h"

#include <gtest/gtest.h>

namespace pipetrain::ir {
namespace {

// x (2, 3, 8, 8) -> Conv(W (4, 3, 3, 3), pad 1) -> Relu -> y; two layers.
Graph conv_relu() {
  Graph g;
  g.set_tensor({"x", DType::kF32, {2, 3, 8, 8}, Role::kInput});
  g.inputs = {"x"};
  g.set_value("W", Tensor(DType::kF32, {4, 3, 3, 3}), Role::kParam);
  g.set_value("B", Tensor(DType::kF32, {4}), Role::kParam);
  Node conv{"/c/Conv", "Conv", {"x", "W", "B"}, {"h"}, {}};
  conv.attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  conv.attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
  g.nodes.push_back(conv);
  g.nodes.push_back({"/r/Relu", "Relu", {"h"}, {"y"}, {}});
  g.outputs = {"y"};
  g.infer_shapes();
  g.set_layers({{"c", {0}}, {"r", {1}}});
  return g;
}

TEST(Cost, ConvCountsTwoFlopsPerMultiplyAdd) {
  Graph g = conv_relu();
  // 2 * (2*4*8*8 outputs) * (3*3*3 taps)
  EXPECT_EQ(node_flops(g, g.nodes[0]), 2 * 2 * 4 * 8 * 8 * 27);
  EXPECT_EQ(node_flops(g, g.nodes[1]), 2 * 4 * 8 * 8);
}

TEST(Cost, ConvGradCountsTheForwardsFlopsPerWantedGradient) {
  Graph g = conv_relu();
  g.set_tensor({"dh", DType::kF32, {2, 4, 8, 8}, Role::kActivation});
  g.set_tensor({"dx", DType::kF32, {2, 3, 8, 8}, Role::kActivation});
  g.set_tensor({"dW", DType::kF32, {4, 3, 3, 3}, Role::kActivation});
  g.set_tensor({"dB", DType::kF32, {4}, Role::kActivation});
  const int64_t forward = 2 * 2 * 4 * 8 * 8 * 27;
  Node all{"/c/Conv/Grad", "ConvGrad", {"dh", "x", "W"}, {"dx", "dW", "dB"}, {}};
  EXPECT_EQ(node_flops(g, all), 2 * forward + 2 * 4 * 8 * 8);
  Node weights_only{"/c/Conv/Grad", "ConvGrad", {"dh", "x", "W"}, {"", "dW"}, {}};
  EXPECT_EQ(node_flops(g, weights_only), forward);
}

TEST(Cost, LayerStatsCountParamsAndActivationsLeavingTheLayer) {
  Graph g = conv_relu();
  auto stats = layer_stats(g);
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].params, 4 * 3 * 3 * 3 + 4);
  EXPECT_EQ(stats[0].activation_bytes, 2 * 4 * 8 * 8 * 4);  // h crosses to layer r
  EXPECT_EQ(stats[1].params, 0);
  EXPECT_EQ(stats[1].activation_bytes, 2 * 4 * 8 * 8 * 4);  // y is a graph output
}

TEST(Cost, ActivationsUsedOnlyInsideALayerDoNotCount) {
  Graph g = conv_relu();
  g.set_layers({{"both", {0, 1}}});
  auto stats = layer_stats(g);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].activation_bytes, 2 * 4 * 8 * 8 * 4);  // only y leaves
}

}  // namespace
}  // namespace pipetrain::ir
