#include "ir/graph.h"

#include <gtest/gtest.h>

#include "ir/error.h"

namespace pipetrain::ir {
namespace {

Graph two_node_graph() {
  Graph g;
  g.name = "t";
  g.set_tensor({"x", DType::kF32, {2, 3}, Role::kInput});
  g.inputs = {"x"};
  g.set_value("w", Tensor(DType::kF32, {2, 3}), Role::kParam);
  g.nodes.push_back({"b", "Relu", {"s"}, {"y"}, {}});
  g.nodes.push_back({"a", "Add", {"x", "w"}, {"s"}, {}});
  g.outputs = {"y"};
  return g;
}

TEST(Graph, TopoOrderPutsProducersFirst) {
  Graph g = two_node_graph();
  auto order = g.topo_order();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], 1u);
  EXPECT_EQ(order[1], 0u);
}

TEST(Graph, CycleIsReportedWithNodeName) {
  Graph g = two_node_graph();
  g.nodes[1].inputs = {"x", "y"};  // a <- b <- a
  try {
    g.topo_order();
    FAIL() << "expected a cycle error";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
}

TEST(Graph, UndefinedInputIsNamed) {
  Graph g = two_node_graph();
  g.nodes[1].inputs = {"x", "nope"};
  try {
    g.topo_order();
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
  }
}

TEST(Graph, ParamsAndCounts) {
  Graph g = two_node_graph();
  EXPECT_EQ(g.params(), std::vector<std::string>{"w"});
  EXPECT_EQ(g.param_count(), 6);
}

TEST(Graph, SetLayersAndVerifyCoverage) {
  Graph g = two_node_graph();
  g.set_layers({{"l0", {0}}});
  EXPECT_EQ(g.nodes[0].layer, 0);
  EXPECT_EQ(g.nodes[1].layer, -1);
}

TEST(Shape, BroadcastFollowsNumpy) {
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {5}), (Shape{5}));
  EXPECT_THROW(broadcast_shapes({2, 3}, {4}), ModelError);
}

TEST(DType, HalfRoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f, 3.140625f})
    EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.5f)), 1.5f);
}

}  // namespace
}  // namespace pipetrain::ir
