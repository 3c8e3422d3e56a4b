#include "ir/op_registry.h"

#include <gtest/gtest.h>

#include "ir/error.h"

namespace pipetrain::ir {
namespace {

Graph relu_graph() {
  Graph g;
  g.set_tensor({"x", DType::kF32, {2, 3}, Role::kInput});
  g.inputs = {"x"};
  g.nodes.push_back({"r", "Relu", {"x"}, {"y"}, {}});
  g.outputs = {"y"};
  g.infer_shapes();
  return g;
}

TEST(OpRegistry, EveryListedOpHasASchemaWithARule) {
  size_t count = 0;
#define PIPETRAIN_CHECK_OP(op)                            \
  {                                                       \
    const OpSchema* s = OpRegistry::instance().find(#op); \
    ASSERT_NE(s, nullptr) << #op;                         \
    EXPECT_TRUE(static_cast<bool>(s->infer)) << #op;      \
    EXPECT_LE(s->min_inputs, s->max_inputs) << #op;       \
    ++count;                                              \
  }
  PIPETRAIN_OPS(PIPETRAIN_CHECK_OP)
#undef PIPETRAIN_CHECK_OP
  EXPECT_EQ(OpRegistry::instance().all().size(), count);
}

TEST(OpRegistry, ShapeAndDtypeNotDifferentiableButConvIs) {
  EXPECT_FALSE(OpRegistry::instance().find("Shape")->differentiable);
  EXPECT_TRUE(OpRegistry::instance().find("Conv")->differentiable);
}

TEST(OpRegistry, UnknownOpAndAttributeAreRefusedByName) {
  Graph g = relu_graph();
  g.nodes[0].attrs["alpha"] = 0.5f;
  try {
    infer_node(g, g.nodes[0]);
    FAIL();
  } catch (const UnsupportedOp& e) {
    EXPECT_NE(std::string(e.what()).find("'alpha'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'r'"), std::string::npos) << e.what();
  }
  g.nodes[0].attrs.clear();
  g.nodes[0].op_type = "Det";  // not in the op list
  EXPECT_THROW(infer_node(g, g.nodes[0]), UnsupportedOp);
}

TEST(Verify, AcceptsAConsistentGraphAndRejectsAWrongDescriptor) {
  Graph g = relu_graph();
  EXPECT_NO_THROW(g.verify());
  g.tensor("y").shape = {3, 2};
  try {
    g.verify();
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("(3, 2)"), std::string::npos) << e.what();
  }
}

TEST(Verify, RejectsDynamicShapesAndDuplicateNames) {
  Graph g = relu_graph();
  g.tensor("x").shape = {-1, 3};
  EXPECT_THROW(g.verify(), ModelError);
  g = relu_graph();
  g.nodes.push_back({"r", "Relu", {"y"}, {"z"}, {}});
  g.infer_shapes();
  EXPECT_THROW(g.verify(), ModelError);
}

TEST(Dump, ShowsNodesShapesAndAttributes) {
  Graph g = relu_graph();
  g.nodes[0].op_type = "LeakyRelu";
  g.nodes[0].attrs["alpha"] = 0.25f;
  g.infer_shapes();
  std::string text = dump(g);
  EXPECT_NE(text.find("LeakyRelu 'r' (x:f32(2, 3)) -> (y:f32(2, 3)) alpha=0.25"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace pipetrain::ir
