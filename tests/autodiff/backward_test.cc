// build_backward's mechanics: fan-out sums, only-needed gradients, layers and
// flags of backward nodes, the rule registry's coverage, and clear errors.
#include <gtest/gtest.h>

#include "autodiff/autodiff.h"
#include "autodiff/grad_builder.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain {
namespace {

using ir::Attribute;

ir::Node node(std::string name, std::string op, std::vector<std::string> in,
              std::vector<std::string> out, std::map<std::string, Attribute> attrs = {}) {
  return {std::move(name), std::move(op), std::move(in), std::move(out), std::move(attrs)};
}

// loss = sum(x * x + x * w): x fans out to three uses; u is a param the loss ignores.
ir::Graph fan_out_graph() {
  ir::Graph g;
  g.set_value("x", ir::Tensor::from_f32({1, -2, 3}, {3}), ir::Role::kParam);
  g.set_value("w", ir::Tensor::from_f32({0.5f, 0.5f, 2}, {3}), ir::Role::kParam);
  g.set_value("u", ir::Tensor::from_f32({7}, {1}), ir::Role::kParam);
  g.nodes.push_back(node("sq", "Mul", {"x", "x"}, {"x2"}));
  g.nodes.push_back(node("xw", "Mul", {"x", "w"}, {"xw"}));
  g.nodes.push_back(node("add", "Add", {"x2", "xw"}, {"s"}));
  g.nodes.push_back(
      node("sum", "ReduceSum", {"s"}, {"loss"}, {{"keepdims", Attribute(int64_t{0})}}));
  g.nodes.push_back(node("unused", "Neg", {"u"}, {"nu"}));
  g.outputs = {"loss", "nu"};
  g.set_layers({{"a", {0, 1}}, {"b", {2, 3, 4}}});
  g.infer_shapes();
  return g;
}

TEST(Backward, SumsFanOutAndComputesOnlyWhatIsNeeded) {
  ir::Graph g = fan_out_graph();
  autodiff::BackwardResult r = autodiff::build_backward(g, "loss");
  g.verify();
  ASSERT_EQ(r.grads.count("x"), 1u);
  ASSERT_EQ(r.grads.count("w"), 1u);
  EXPECT_EQ(r.grads.count("u"), 0u) << "u does not reach the loss";
  for (size_t i = r.forward_nodes; i < g.nodes.size(); ++i) {
    EXPECT_TRUE(g.nodes[i].backward) << g.nodes[i].name;
    EXPECT_GE(g.nodes[i].layer, 0) << g.nodes[i].name;
    for (const auto& in : g.nodes[i].inputs) EXPECT_NE(in, "nu") << "backward reads unneeded 'nu'";
  }
  auto backend = exec::make_cpu_backend();
  auto outs = exec::ForwardRunner(g, *backend).run({});
  const ir::Tensor& dx = outs.at(r.grads.at("x"));  // 2x + w
  const ir::Tensor& dw = outs.at(r.grads.at("w"));  // x
  const float want_dx[] = {2.5f, -3.5f, 8.0f}, want_dw[] = {1, -2, 3};
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(dx.data<float>()[i], want_dx[i]);
    EXPECT_FLOAT_EQ(dw.data<float>()[i], want_dw[i]);
  }
}

// A batched MatMul's gradients read its operands transposed in place (the
// kernels' transA / transB): dA = dY B^T and dB = A^T dY copy nothing.
TEST(Backward, BatchedMatMulGradientsReadOperandsTransposedWithoutCopies) {
  ir::Graph g;
  g.set_value("a", ir::Tensor::from_f32(std::vector<float>(24, 0.5f), {2, 3, 4}), ir::Role::kParam);
  g.set_value("b", ir::Tensor::from_f32(std::vector<float>(40, 0.25f), {2, 4, 5}),
              ir::Role::kParam);
  g.nodes.push_back(node("mm", "MatMul", {"a", "b"}, {"y"}));
  g.nodes.push_back(
      node("sum", "ReduceSum", {"y"}, {"loss"}, {{"keepdims", Attribute(int64_t{0})}}));
  g.outputs = {"loss"};
  g.infer_shapes();
  autodiff::BackwardResult r = autodiff::build_backward(g, "loss");
  std::vector<std::pair<int64_t, int64_t>> flags;  // (transA, transB) of each backward MatMul
  for (size_t i = r.forward_nodes; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    EXPECT_NE(n.op_type, "Transpose") << n.name;
    if (n.op_type == "MatMul") flags.emplace_back(n.attr_int("transA", 0), n.attr_int("transB", 0));
  }
  EXPECT_EQ(flags, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 0}}));
  auto backend = exec::make_cpu_backend();
  auto outs = exec::ForwardRunner(g, *backend).run({});
  // dA = ones (3, 5) B^T: every element 5 * 0.25; dB = A^T ones (3, 5): 3 * 0.5.
  const ir::Tensor &da = outs.at(r.grads.at("a")), &db = outs.at(r.grads.at("b"));
  for (int64_t i = 0; i < da.numel(); ++i) EXPECT_FLOAT_EQ(da.data<float>()[i], 1.25f);
  for (int64_t i = 0; i < db.numel(); ++i) EXPECT_FLOAT_EQ(db.data<float>()[i], 1.5f);
}

TEST(Backward, BackwardNodesJoinTheirForwardLayer) {
  ir::Graph g = fan_out_graph();
  autodiff::BackwardResult r = autodiff::build_backward(g, "loss");
  // The gradient of "sq" (layer a) is computed in layer a.
  bool found = false;
  for (size_t i = r.forward_nodes; i < g.nodes.size(); ++i)
    if (g.nodes[i].name.rfind("sq/Grad/", 0) == 0) {
      EXPECT_EQ(g.nodes[i].layer, 0);
      found = true;
    }
  EXPECT_TRUE(found);
}

TEST(Backward, RefusesBadLosses) {
  ir::Graph g = fan_out_graph();
  try {
    autodiff::build_backward(g, "s");
    FAIL() << "a 3-element loss was accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("one element"), std::string::npos) << e.what();
  }
  EXPECT_THROW(autodiff::build_backward(g, "nope"), ModelError);
  ir::Graph h = fan_out_graph();
  h.nodes.push_back(
      node("c", "ReduceSum", {"nu"}, {"lossu"}, {{"keepdims", Attribute(int64_t{0})}}));
  h.infer_shapes();
  autodiff::BackwardOptions only_x;
  only_x.wrt = {"x"};
  EXPECT_THROW(autodiff::build_backward(h, "lossu", only_x), ModelError);
}

TEST(Backward, NamesTheNodeWithoutAGradient) {
  ir::Graph g;
  g.set_value("x", ir::Tensor::from_f32({1, 2, 3}, {3}), ir::Role::kParam);
  g.set_value("pads", ir::Tensor::from_i64({-1, 1}, {2}), ir::Role::kConstant);
  g.nodes.push_back(node("pad_crop", "Pad", {"x", "pads"}, {"y"}));
  g.nodes.push_back(
      node("sum", "ReduceSum", {"y"}, {"loss"}, {{"keepdims", Attribute(int64_t{0})}}));
  g.outputs = {"loss"};
  g.infer_shapes();
  try {
    autodiff::build_backward(g, "loss");
    FAIL() << "cropping with constant padding has no gradient rule";
  } catch (const UnsupportedOp& e) {
    EXPECT_NE(std::string(e.what()).find("pad_crop"), std::string::npos) << e.what();
  }
}

// Every op of the list has a rule or an explicit "no gradient", matching its schema.
TEST(Backward, RegistryCoversEveryOp) {
  const auto& rules = autodiff::rule_registry();
  for (const auto& [op, schema] : ir::OpRegistry::instance().all()) {
    if (schema.internal) continue;
    auto it = rules.find(op);
    ASSERT_NE(it, rules.end()) << op << " has neither a gradient rule nor a no-gradient entry";
    EXPECT_EQ(it->second.rule != nullptr, schema.differentiable) << op;
  }
}

}  // namespace
}  // namespace pipetrain
