// The import-time fusion passes (ir/passes/fusion.h): what they match, what
// they leave alone, where the fused nodes stand, and that the loss and every
// parameter gradient of the fused graph match the unfused graph's within
// float32 rounding.
#include "ir/passes/fusion.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "autodiff/autodiff.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "tests/autodiff/grad_check.h"
#include "tests/executor/op_test_util.h"
#include "tests/ir/fusion_test_util.h"

namespace pipetrain {
namespace {

using ir::Attribute;
using test::op_sequence;

struct Variant {
  bool gelu_half_first = false;    // (x * 0.5) * (1 + erf) instead of x * (1 + erf) * 0.5
  bool gelu_mul_by_rsqrt = false;  // x * (1 / sqrt 2) instead of x / sqrt 2
  float sqrt2 = 1.4142135f;
  float dropout_ratio = 0.0f;
  bool read_erf = false;         // the Erf's output is also a graph output
  bool read_mask = false;        // the Dropout's mask is a graph output
  bool share_transpose = false;  // a second MatMul reads the transposed weight
};

// x (4, 6, 8) -> MatMul(x, Transpose(W1 (5, 8))) + b1 -> GELU chain -> Dropout
// -> MatMul(., W2 (5, 3)) + b2 -> rows (24, 3) -> cross-entropy: a PyTorch
// transformer's feed-forward block as its exporter writes it.
ir::Graph block(const Variant& v) {
  std::mt19937_64 rng(5);
  ir::Graph g;
  auto value = [&](const std::string& name, ir::Shape s) {
    g.set_value(name, test::random_tensor(s, test::Gen::kUniform, rng), ir::Role::kParam);
  };
  auto constant = [&](const std::string& name, float f) {
    g.set_value(name, ir::Tensor::scalar_f32(f), ir::Role::kConstant);
  };
  g.set_tensor({"x", ir::DType::kF32, {4, 6, 8}, ir::Role::kInput});
  g.set_tensor({"y", ir::DType::kI64, {24}, ir::Role::kInput});
  g.inputs = {"x", "y"};
  value("w1", {5, 8});
  value("b1", {5});
  value("w2", {5, 3});
  value("b2", {3});
  constant("sqrt2", v.gelu_mul_by_rsqrt ? 1.0f / v.sqrt2 : v.sqrt2);
  constant("one", 1.0f);
  constant("half", 0.5f);
  constant("ratio", v.dropout_ratio);
  g.set_value(
      "training",
      [] {
        ir::Tensor t(ir::DType::kBool, {});
        *static_cast<bool*>(t.raw()) = true;
        return t;
      }(),
      ir::Role::kConstant);
  g.set_value("rows", ir::Tensor::from_i64({24, 3}, {2}), ir::Role::kConstant);
  auto node = [&](const std::string& name, const std::string& op, std::vector<std::string> in,
                  std::vector<std::string> out, std::map<std::string, Attribute> attrs = {}) {
    g.nodes.push_back({name, op, std::move(in), std::move(out), std::move(attrs)});
  };
  node("/fc1/Transpose", "Transpose", {"w1"}, {"w1t"},
       {{"perm", Attribute(std::vector<int64_t>{1, 0})}});
  node("/fc1/MatMul", "MatMul", {"x", "w1t"}, {"h0"});
  node("/fc1/Add", "Add", {"b1", "h0"}, {"h"});
  node("/Div", v.gelu_mul_by_rsqrt ? "Mul" : "Div", {"h", "sqrt2"}, {"u"});
  node("/Erf", "Erf", {"u"}, {"e"});
  node("/Add_1", "Add", {"e", "one"}, {"e1"});
  if (v.gelu_half_first) {
    node("/Mul", "Mul", {"h", "half"}, {"hh"});
    node("/Mul_1", "Mul", {"hh", "e1"}, {"a"});
  } else {
    node("/Mul", "Mul", {"h", "e1"}, {"he"});
    node("/Mul_1", "Mul", {"he", "half"}, {"a"});
  }
  node("/drop/Dropout", "Dropout", {"a", "ratio", "training"}, {"ad", v.read_mask ? "mask" : ""});
  node("/fc2/MatMul", "MatMul", {"ad", "w2"}, {"z0"});
  node("/fc2/Add", "Add", {"z0", "b2"}, {"z"});
  node("/rows", "Reshape", {"z", "rows"}, {"logits"});
  node("/loss", "SoftmaxCrossEntropyLoss", {"logits", "y"}, {"loss"});
  g.outputs = {"loss"};
  if (v.read_erf) g.outputs.push_back("e");
  if (v.read_mask) g.outputs.push_back("mask");
  if (v.share_transpose) {
    node("/other/MatMul", "MatMul", {"x", "w1t"}, {"other"});
    g.outputs.push_back("other");
  }
  g.infer_shapes();
  g.verify();
  return g;
}

TEST(Fusion, FeedForwardBlockBecomesGemmGeluGemm) {
  for (bool half_first : {false, true})
    for (bool rsqrt : {false, true}) {
      Variant v;
      v.gelu_half_first = half_first;
      v.gelu_mul_by_rsqrt = rsqrt;
      ir::Graph g = block(v);
      const ir::passes::FusionCounts c = ir::passes::fuse(g);
      EXPECT_EQ(c.idle_dropout, 1);
      EXPECT_EQ(c.gelu, 1);
      EXPECT_EQ(c.weight_gemm, 2);
      g.infer_shapes();
      g.verify();
      // The fused nodes stand where their chains stood.
      EXPECT_EQ(op_sequence(g),
                (std::vector<std::string>{"Reshape", "Gemm", "Reshape", "Gelu", "Reshape", "Gemm",
                                          "Reshape", "Reshape", "SoftmaxCrossEntropyLoss"}))
          << "half first " << half_first << ", rsqrt " << rsqrt;
      EXPECT_EQ(g.nodes[1].attr_int("transB", 0), 1);  // the weight, untransposed
      EXPECT_EQ(g.nodes[5].attr_int("transB", 0), 0);
    }
}

TEST(Fusion, LossAndGradientsMatchTheUnfusedGraph) {
  ir::Graph plain = block({}), fused = block({});
  ir::passes::fuse(fused);
  fused.infer_shapes();
  auto plain_grads = autodiff::build_backward(plain, "loss").grads;
  auto fused_grads = autodiff::build_backward(fused, "loss").grads;
  ASSERT_EQ(plain_grads.size(), 4u);
  ASSERT_EQ(fused_grads.size(), 4u);
  std::mt19937_64 rng(8);
  std::vector<int64_t> labels(24);
  for (auto& l : labels) l = static_cast<int64_t>(rng() % 3);
  std::map<std::string, ir::Tensor> feeds = {
      {"x", test::random_tensor({4, 6, 8}, test::Gen::kUniform, rng)},
      {"y", ir::Tensor::from_i64(labels, {24})}};
  auto backend = exec::make_cpu_backend();
  exec::RunOptions o;
  o.training = true;
  auto a = exec::ForwardRunner(plain, *backend).run(feeds, o);
  auto b = exec::ForwardRunner(fused, *backend).run(feeds, o);
  // Each result is a handful of roundings deep (GELU's own evaluation, a
  // GEMM with a bias in its epilogue rather than after it, K <= 8 terms):
  // bounded by 32 eps of the tensor's largest element.
  const double eps = std::numeric_limits<float>::epsilon();
  auto expect_close = [&](const ir::Tensor& x, const ir::Tensor& y, const std::string& what) {
    ASSERT_EQ(x.shape(), y.shape()) << what;
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < y.numel(); ++i) scale = std::max(scale, std::abs(double(y.at(i))));
    for (int64_t i = 0; i < y.numel(); ++i)
      worst = std::max(worst, std::abs(double(x.at(i)) - double(y.at(i))));
    EXPECT_LE(worst, 32 * eps * scale) << what << ": largest element " << scale;
  };
  expect_close(b.at("loss"), a.at("loss"), "loss");
  for (const auto& [param, grad] : plain_grads)
    expect_close(b.at(fused_grads.at(param)), a.at(grad), "d loss / d " + param);
}

// x (6, 8) -> Gemm(W1 (5, 8) transposed, b1) -> Relu -> Gemm(W2 (5, 3), b2)
// -> Relu -> y: an MLP as PyTorch exports its Linear layers.
ir::Graph mlp() {
  std::mt19937_64 rng(21);
  ir::Graph g;
  g.set_tensor({"x", ir::DType::kF32, {6, 8}, ir::Role::kInput});
  g.inputs = {"x"};
  for (auto [name, shape] : std::vector<std::pair<std::string, ir::Shape>>{
           {"w1", {5, 8}}, {"b1", {5}}, {"w2", {5, 3}}, {"b2", {3}}})
    g.set_value(name, test::random_tensor(shape, test::Gen::kUniform, rng), ir::Role::kParam);
  g.nodes.push_back(
      {"/fc1/Gemm", "Gemm", {"x", "w1", "b1"}, {"h1"}, {{"transB", Attribute(int64_t{1})}}});
  g.nodes.push_back({"/relu1/Relu", "Relu", {"h1"}, {"a1"}, {}});
  g.nodes.push_back({"/fc2/Gemm", "Gemm", {"a1", "w2", "b2"}, {"h2"}, {}});
  g.nodes.push_back({"/relu2/Relu", "Relu", {"h2"}, {"y"}, {}});
  g.outputs = {"y"};
  g.infer_shapes();
  g.verify();
  return g;
}

// Gemm + ReLU for forward-only graphs (training keeps the ReLU's layer):
// the fused Gemm's output is the unfused pair's bits on the CPU and the
// portable backend (the same product, then max(y, 0)), and so are the loss
// and gradients of such a graph (ReluGrad from Y, then the Gemm's).
TEST(Fusion, GemmReluMatchesTheUnfusedPairForwardAndBackward) {
  ir::Graph plain = mlp(), fused = mlp();
  EXPECT_EQ(ir::passes::fuse(fused).gemm_relu, 0);  // not without `inference`
  EXPECT_EQ(ir::passes::fuse(fused, /*inference=*/true).gemm_relu, 2);
  fused.infer_shapes();
  fused.verify();
  EXPECT_EQ(op_sequence(fused), (std::vector<std::string>{"Gemm", "Gemm"}));
  EXPECT_EQ(fused.nodes[0].attr_string("activation", ""), "Relu");
  EXPECT_EQ(fused.nodes[0].outputs, std::vector<std::string>{"a1"});
  auto same_bits = [](const std::string& what, const ir::Tensor& got, const ir::Tensor& want) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    int zeros = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      EXPECT_EQ(got.at(i), want.at(i)) << what << " element " << i;
      zeros += want.at(i) == 0.0f;
    }
    if (what == "y") {
      EXPECT_GT(zeros, 0);  // the ReLU clipped something
    }
  };
  test::compare_outputs(plain, fused, 2, [&](const ir::Tensor& got, const ir::Tensor& want) {
    same_bits("y", got, want);
  });
  test::compare_training(plain, fused, 2, same_bits);
  test::expect_split_inverts_fuse(plain, fused, 2, /*inference=*/true);  // as exported
  ir::Graph bad = fused;
  bad.nodes[0].attrs["activation"] = Attribute(std::string("Tanh"));
  test::expect_refused(bad, "Relu only");
}

TEST(Fusion, PatternsOthersStillReadAreLeftAlone) {
  {
    Variant v;
    v.read_erf = true;  // the GELU's inside is a graph output
    ir::Graph g = block(v);
    EXPECT_EQ(ir::passes::fuse_gelu(g), 0);
  }
  {
    Variant v;
    v.sqrt2 = 1.5f;  // not GELU
    ir::Graph g = block(v);
    EXPECT_EQ(ir::passes::fuse_gelu(g), 0);
  }
  {
    Variant v;
    v.read_mask = true;  // the mask is used: the Dropout stays
    ir::Graph g = block(v);
    EXPECT_EQ(ir::passes::drop_idle_dropout(g), 0);
  }
  {
    Variant v;
    v.dropout_ratio = 0.5f;  // drops
    ir::Graph g = block(v);
    EXPECT_EQ(ir::passes::drop_idle_dropout(g), 0);
  }
  {
    Variant v;
    v.share_transpose = true;  // another MatMul reads the transposed weight
    ir::Graph g = block(v);
    // fc1 keeps its Transpose and its MatMul (what it multiplies by is no
    // value any more); fc2 (a weight and a bias) fuses.
    EXPECT_EQ(ir::passes::fuse_weight_gemm(g), 1);
    g.infer_shapes();
    g.verify();
    int transposes = 0;
    for (const auto& n : g.nodes) transposes += n.op_type == "Transpose";
    EXPECT_EQ(transposes, 1);
  }
}

}  // namespace
}  // namespace pipetrain
