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

// loss = sum_i sum(x[:, r_i] * c_i) over column ranges r_i of a (2, 6) param
// x, each c_i a constant of its slice's shape (values 1 + column + 10 row):
// dx is c_i where r_i covers a column (summed where ranges overlap), else 0.
struct SlicedGraph {
  ir::Graph g;
  std::vector<float> want_dx = std::vector<float>(12, 0.0f);
};
SlicedGraph sliced_graph(const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  SlicedGraph s;
  ir::Graph& g = s.g;
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[i] = 0.5f * static_cast<float>(i) - 2.0f;
  g.set_value("x", ir::Tensor::from_f32(x, {2, 6}), ir::Role::kParam);
  std::vector<size_t> layer_a, layer_b;
  std::string total;
  for (size_t r = 0; r < ranges.size(); ++r) {
    const auto [lo, hi] = ranges[r];
    const std::string k = std::to_string(r);
    std::vector<float> c;
    for (int64_t row = 0; row < 2; ++row)
      for (int64_t col = lo; col < hi; ++col) {
        c.push_back(1.0f + static_cast<float>(col + 10 * row));
        s.want_dx[static_cast<size_t>(row * 6 + col)] += c.back();
      }
    g.set_value("c" + k, ir::Tensor::from_f32(c, {2, hi - lo}), ir::Role::kConstant);
    g.set_value("lo" + k, ir::Tensor::from_i64({lo}, {1}), ir::Role::kConstant);
    g.set_value("hi" + k, ir::Tensor::from_i64({hi}, {1}), ir::Role::kConstant);
    g.set_value("axis" + k, ir::Tensor::from_i64({1}, {1}), ir::Role::kConstant);
    layer_a.push_back(g.nodes.size());
    g.nodes.push_back(node("slice" + k, "Slice", {"x", "lo" + k, "hi" + k, "axis" + k}, {"s" + k}));
    layer_b.push_back(g.nodes.size());
    g.nodes.push_back(node("mul" + k, "Mul", {"s" + k, "c" + k}, {"m" + k}));
    layer_b.push_back(g.nodes.size());
    g.nodes.push_back(
        node("sum" + k, "ReduceSum", {"m" + k}, {"t" + k}, {{"keepdims", Attribute(int64_t{0})}}));
    if (r > 0) {
      layer_b.push_back(g.nodes.size());
      g.nodes.push_back(node("add" + k, "Add", {total, "t" + k}, {"u" + k}));
    }
    total = r > 0 ? "u" + k : "t" + k;
  }
  g.outputs = {total};
  g.set_layers({{"slices", layer_a}, {"rest", layer_b}});
  g.infer_shapes();
  return s;
}

// A param cut into slices that tile one axis (a packed q/k/v projection):
// its gradient is one Concat of the slices' gradients, no SliceGrad and no
// Add of full-size zero-padded tensors; equal to the sum it replaces.
TEST(Backward, SlicesThatTileAnAxisSumTheirGradientsAsOneConcat) {
  struct Case {
    std::vector<std::pair<int64_t, int64_t>> ranges;
    bool concat;
  };
  const Case cases[] = {{{{2, 5}, {0, 2}, {5, 6}}, true},  // tiles, out of order
                        {{{0, 2}, {3, 6}}, false},         // a gap: column 2 gets 0
                        {{{0, 4}, {2, 6}}, false}};        // an overlap: summed
  for (const Case& c : cases) {
    SlicedGraph s = sliced_graph(c.ranges);
    ir::Graph& g = s.g;
    const std::string loss = g.outputs[0];
    autodiff::BackwardResult r = autodiff::build_backward(g, loss);
    g.verify();
    int concats = 0, slice_grads = 0;
    for (size_t i = r.forward_nodes; i < g.nodes.size(); ++i) {
      concats += g.nodes[i].op_type == "Concat";
      slice_grads += g.nodes[i].op_type == "SliceGrad";
      EXPECT_GE(g.nodes[i].layer, 0) << g.nodes[i].name;
    }
    EXPECT_EQ(concats, c.concat ? 1 : 0) << c.ranges.size() << " ranges";
    EXPECT_EQ(slice_grads, c.concat ? 0 : static_cast<int>(c.ranges.size()));
    size_t covered = 0;
    for (const auto& layer : g.layers) covered += layer.nodes.size();
    EXPECT_EQ(covered, g.nodes.size()) << "every node in one layer";
    auto backend = exec::make_cpu_backend();
    auto outs = exec::ForwardRunner(g, *backend).run({});
    const ir::Tensor& dx = outs.at(r.grads.at("x"));
    for (int i = 0; i < 12; ++i) EXPECT_EQ(dx.data<float>()[i], s.want_dx[i]) << "element " << i;
  }
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
