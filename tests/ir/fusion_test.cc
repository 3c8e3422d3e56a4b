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
#include "ir/error.h"
#include "tests/autodiff/grad_check.h"
#include "tests/executor/op_test_util.h"

namespace pipetrain {
namespace {

using ir::Attribute;

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

std::vector<std::string> op_sequence(const ir::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op_type);
  return ops;
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

// x (2, 3, 8, 8) -> Conv + bias -> Relu -> Conv -> Relu -> y: a CNN's
// blocks as exporters write them (BatchNorm folded away in eval mode).
// `read_conv1`: the first Conv's output is a graph output too.
ir::Graph conv_block(bool read_conv1) {
  std::mt19937_64 rng(9);
  ir::Graph g;
  g.set_tensor({"x", ir::DType::kF32, {2, 3, 8, 8}, ir::Role::kInput});
  g.inputs = {"x"};
  for (auto [name, shape] : std::vector<std::pair<std::string, ir::Shape>>{
           {"w1", {4, 3, 3, 3}}, {"b1", {4}}, {"w2", {8, 4, 3, 3}}})
    g.set_value(name, test::random_tensor(shape, test::Gen::kUniform, rng), ir::Role::kParam);
  const std::map<std::string, Attribute> pads = {
      {"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})}};
  g.nodes.push_back({"/c1/Conv", "Conv", {"x", "w1", "b1"}, {"h1"}, pads});
  g.nodes.push_back({"/r1/Relu", "Relu", {"h1"}, {"a1"}, {}});
  g.nodes.push_back({"/c2/Conv", "Conv", {"a1", "w2"}, {"h2"}, pads});
  g.nodes.push_back({"/r2/Relu", "Relu", {"h2"}, {"y"}, {}});
  g.outputs = {"y"};
  if (read_conv1) g.outputs.push_back("h1");
  g.infer_shapes();
  g.verify();
  return g;
}

// Output y of `plain` and of `fused` for one random x (of the graph's shape)
// on the CPU and on the portable backend: check(got, want) for each.
template <typename Check>
void compare_outputs(const ir::Graph& plain, const ir::Graph& fused, uint64_t seed, Check check) {
  std::mt19937_64 rng(seed);
  const std::map<std::string, ir::Tensor> feeds = {
      {"x", test::random_tensor(plain.tensor("x").shape, test::Gen::kUniform, rng)}};
  for (auto make :
       {+[] { return exec::make_cpu_backend(); }, +[] { return exec::make_portable_backend(); }}) {
    auto backend = make();
    SCOPED_TRACE(backend->name());
    check(exec::ForwardRunner(fused, *backend).run(feeds, {}).at("y"),
          exec::ForwardRunner(plain, *backend).run(feeds, {}).at("y"));
  }
}

// Conv + ReLU for forward-only graphs: the fused Conv gives the unfused
// pair's outputs on the CPU backend (oneDNN's post-op) and the portable one
// (the shared kernels), exactly: the same convolution, then max(y, 0).
TEST(Fusion, ConvReluForwardOnlyMatchesTheUnfusedPair) {
  ir::Graph plain = conv_block(false), fused = conv_block(false);
  EXPECT_EQ(ir::passes::fuse(fused).conv_relu, 0);  // not without `inference`
  EXPECT_EQ(ir::passes::fuse(fused, /*inference=*/true).conv_relu, 2);
  fused.infer_shapes();
  fused.verify();
  EXPECT_EQ(op_sequence(fused), (std::vector<std::string>{"Conv", "Conv"}));
  EXPECT_EQ(fused.nodes[1].attr_string("activation", ""), "Relu");
  EXPECT_EQ(fused.nodes[1].outputs, std::vector<std::string>{"y"});
  compare_outputs(plain, fused, 4, [](const ir::Tensor& got, const ir::Tensor& want) {
    ASSERT_EQ(got.shape(), want.shape());
    int zeros = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      EXPECT_EQ(got.at(i), want.at(i)) << "element " << i;
      zeros += want.at(i) == 0.0f;
    }
    EXPECT_GT(zeros, 0);  // the ReLU clipped something
  });
  // A Conv fused so cannot be differentiated: one clear error.
  fused.nodes.push_back(
      {"/loss", "ReduceMean", {"y"}, {"loss"}, {{"keepdims", Attribute(int64_t{0})}}});
  fused.outputs = {"loss"};
  fused.infer_shapes();
  try {
    autodiff::build_backward(fused, "loss");
    FAIL() << "the fused Conv was differentiated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fused with its activation"), std::string::npos)
        << e.what();
  }
}

TEST(Fusion, ConvReluLeavesAConvOutputOthersRead) {
  ir::Graph g = conv_block(/*read_conv1=*/true);
  EXPECT_EQ(ir::passes::fuse_conv_relu(g), 1);  // the second pair only
  g.infer_shapes();
  g.verify();
  EXPECT_EQ(op_sequence(g), (std::vector<std::string>{"Conv", "Relu", "Conv"}));
  EXPECT_FALSE(g.nodes[0].has_attr("activation"));
}

// x (2, 3, 8, 8) -> Conv + bias -> BatchNorm -> Relu -> Conv -> BatchNorm
// -> y, the statistics of a trained model (ONNX model-zoo CNNs keep their
// BatchNorms). `training_mode`: the second BatchNorm normalises with the
// batch statistics (it must stay).
ir::Graph conv_bn_block(bool training_mode = false) {
  std::mt19937_64 rng(11);
  ir::Graph g;
  g.set_tensor({"x", ir::DType::kF32, {2, 3, 8, 8}, ir::Role::kInput});
  g.inputs = {"x"};
  auto value = [&](const std::string& name, ir::Shape shape, test::Gen gen) {
    g.set_value(name, test::random_tensor(shape, gen, rng), ir::Role::kParam);
  };
  value("w1", {4, 3, 3, 3}, test::Gen::kUniform);
  value("b1", {4}, test::Gen::kUniform);
  value("w2", {8, 4, 3, 3}, test::Gen::kUniform);
  for (auto [bn, c] : std::vector<std::pair<std::string, int64_t>>{{"bn1", 4}, {"bn2", 8}}) {
    value(bn + ".scale", {c}, test::Gen::kUniform);
    value(bn + ".bias", {c}, test::Gen::kUniform);
    value(bn + ".mean", {c}, test::Gen::kUniform);
    value(bn + ".var", {c}, test::Gen::kPositive);
  }
  const std::map<std::string, Attribute> pads = {
      {"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})}};
  auto bn_node = [&](const std::string& bn, const std::string& in, const std::string& out,
                     bool training) {
    std::map<std::string, Attribute> attrs = {{"epsilon", Attribute(1e-3f)}};
    if (training) attrs["training_mode"] = Attribute(int64_t{1});
    g.nodes.push_back({"/" + bn + "/BatchNormalization",
                       "BatchNormalization",
                       {in, bn + ".scale", bn + ".bias", bn + ".mean", bn + ".var"},
                       {out},
                       attrs});
  };
  g.nodes.push_back({"/c1/Conv", "Conv", {"x", "w1", "b1"}, {"h1"}, pads});
  bn_node("bn1", "h1", "n1", false);
  g.nodes.push_back({"/r1/Relu", "Relu", {"n1"}, {"a1"}, {}});
  g.nodes.push_back({"/c2/Conv", "Conv", {"a1", "w2"}, {"h2"}, pads});
  bn_node("bn2", "h2", "y", training_mode);
  g.outputs = {"y"};
  g.infer_shapes();
  g.verify();
  return g;
}

// Conv + BatchNorm folded for forward-only graphs: one Conv per pair (the
// first also takes its ReLU), the same outputs within float32 rounding of
// the convolution's 27 and 36 products (the folded weights are W a rounded
// once, the unfused pair rounds the convolution, then (y - mean) a + B).
TEST(Fusion, ConvBatchNormFoldsIntoTheConvForForwardOnlyRuns) {
  ir::Graph plain = conv_bn_block(), fused = conv_bn_block();
  EXPECT_EQ(ir::passes::fuse(fused).conv_batchnorm, 0);  // not without `inference`
  const ir::passes::FusionCounts counts = ir::passes::fuse(fused, /*inference=*/true);
  EXPECT_EQ(counts.conv_batchnorm, 2);
  EXPECT_EQ(counts.conv_relu, 1);
  fused.infer_shapes();
  fused.verify();
  EXPECT_EQ(op_sequence(fused), (std::vector<std::string>{"Conv", "Conv"}));
  EXPECT_EQ(fused.nodes[0].attr_string("activation", ""), "Relu");
  EXPECT_EQ(fused.nodes[1].outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(fused.nodes[1].inputs.size(), 3u);  // the folded bias, though the Conv had none
  compare_outputs(plain, fused, 6, [](const ir::Tensor& got, const ir::Tensor& want) {
    EXPECT_LE(test::closeness(got, want, 1e-5, 1e-5), 1.0);
  });
}

TEST(Fusion, ConvBatchNormStaysWhereTheBatchNormIsTrainingOrOthersReadTheConv) {
  ir::Graph g = conv_bn_block(/*training_mode=*/true);
  g.outputs.push_back("h1");  // the first Conv's output is read outside the pair
  EXPECT_EQ(ir::passes::fold_conv_batchnorm(g), 0);
  g.infer_shapes();
  g.verify();
  EXPECT_EQ(op_sequence(g), (std::vector<std::string>{"Conv", "BatchNormalization", "Relu", "Conv",
                                                      "BatchNormalization"}));
}

// x (2, 16, 8, 8) -> two residual blocks as ResNet's exporter writes them
// (BatchNorms folded away): Conv -> Relu -> Conv -> Add(., downsample Conv
// of x, which comes after it in the file) -> Relu, then Conv -> Add(x, .)
// -> y. 16 channels, so that the CPU's blocked layout (nChw8c, nChw16c or
// nhwc) holds the intermediates: the first Add's residual is blocked like
// its output (copied in), the second's is the plain graph input (reordered
// in). `broadcast_bias`: the second Add adds a (1, 16, 1, 1) value instead.
ir::Graph residual_block(bool broadcast_bias = false) {
  std::mt19937_64 rng(13);
  ir::Graph g;
  g.set_tensor({"x", ir::DType::kF32, {2, 16, 8, 8}, ir::Role::kInput});
  g.inputs = {"x"};
  for (auto [name, shape] : std::vector<std::pair<std::string, ir::Shape>>{{"w1", {16, 16, 3, 3}},
                                                                           {"b1", {16}},
                                                                           {"w2", {16, 16, 3, 3}},
                                                                           {"b2", {16}},
                                                                           {"w3", {16, 16, 1, 1}},
                                                                           {"w4", {16, 16, 3, 3}},
                                                                           {"bias", {1, 16, 1, 1}}})
    g.set_value(name, test::random_tensor(shape, test::Gen::kUniform, rng), ir::Role::kParam);
  const std::map<std::string, Attribute> pads = {
      {"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})}};
  g.nodes.push_back({"/c1/Conv", "Conv", {"x", "w1", "b1"}, {"h1"}, pads});
  g.nodes.push_back({"/r1/Relu", "Relu", {"h1"}, {"a1"}, {}});
  g.nodes.push_back({"/c2/Conv", "Conv", {"a1", "w2", "b2"}, {"h2"}, pads});
  g.nodes.push_back({"/down/Conv", "Conv", {"x", "w3"}, {"d"}, {}});
  g.nodes.push_back({"/add1/Add", "Add", {"h2", "d"}, {"s1"}, {}});
  g.nodes.push_back({"/r2/Relu", "Relu", {"s1"}, {"a2"}, {}});
  g.nodes.push_back({"/c4/Conv", "Conv", {"a2", "w4"}, {"h4"}, pads});
  g.nodes.push_back({"/add2/Add", "Add", {broadcast_bias ? "bias" : "x", "h4"}, {"y"}, {}});
  g.outputs = {"y"};
  g.infer_shapes();
  g.verify();
  return g;
}

// Conv + Add (+ Relu) for forward-only graphs: each residual Add (and the
// Relu after it) goes into the Conv before it, placed where the Add stood
// (after the downsample Conv it reads). The outputs match the unfused
// graph's on the CPU and the portable backend within the rounding of the
// three-term sum conv + bias + residual taken in another order: oneDNN's
// brgemm kernels (AVX-512) add the residual last, as the Add does, and give
// the unfused bits; its AVX2 kernels accumulate onto the residual and differ
// by an ulp or two (ONEDNN_MAX_CPU_ISA=AVX2 shows it on any CPU); 8 ulps of
// the largest output bound both.
TEST(Fusion, ConvAddReluForwardOnlyMatchesTheUnfusedNodes) {
  ir::Graph plain = residual_block(), fused = residual_block();
  EXPECT_EQ(ir::passes::fuse(fused).conv_add, 0);  // not without `inference`
  const ir::passes::FusionCounts counts = ir::passes::fuse(fused, /*inference=*/true);
  EXPECT_EQ(counts.conv_add, 2);
  EXPECT_EQ(counts.conv_relu, 1);
  fused.infer_shapes();
  fused.verify();
  EXPECT_EQ(op_sequence(fused), (std::vector<std::string>{"Conv", "Conv", "Conv", "Conv"}));
  const ir::Node& c2 = fused.nodes[2];
  EXPECT_EQ(c2.inputs, (std::vector<std::string>{"a1", "w2", "b2", "d"}));
  EXPECT_EQ(c2.attr_string("activation", ""), "Relu");
  EXPECT_EQ(c2.outputs, std::vector<std::string>{"a2"});
  const ir::Node& c4 = fused.nodes[3];
  EXPECT_EQ(c4.inputs, (std::vector<std::string>{"a2", "w4", "", "x"}));  // no bias
  EXPECT_FALSE(c4.has_attr("activation"));
  EXPECT_EQ(c4.outputs, std::vector<std::string>{"y"});
  compare_outputs(plain, fused, 8, [](const ir::Tensor& got, const ir::Tensor& want) {
    ASSERT_EQ(got.shape(), want.shape());
    double top = 0;
    for (int64_t i = 0; i < want.numel(); ++i) top = std::max(top, std::abs(want.at(i)));
    ASSERT_GT(top, 1.0);                      // the residual blocks computed something
    const double tol = std::ldexp(top, -20);  // 8 ulps of the largest output (2^-23 each)
    for (int64_t i = 0; i < want.numel(); ++i)
      EXPECT_NEAR(got.at(i), want.at(i), tol) << "element " << i;
  });
  // Such a Conv cannot be differentiated: one clear error.
  fused.nodes.push_back(
      {"/loss", "ReduceMean", {"y"}, {"loss"}, {{"keepdims", Attribute(int64_t{0})}}});
  fused.outputs = {"loss"};
  fused.infer_shapes();
  try {
    autodiff::build_backward(fused, "loss");
    FAIL() << "the fused Conv was differentiated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fused with its"), std::string::npos) << e.what();
  }
}

// An Add that broadcasts (a per-channel value) is no residual: it stays,
// and the Conv before it with it; a residual of another shape is refused
// by the schema.
TEST(Fusion, ConvAddLeavesABroadcastAddAndTheSchemaChecksTheResidual) {
  ir::Graph g = residual_block(/*broadcast_bias=*/true);
  EXPECT_EQ(ir::passes::fuse_conv_add(g), 1);  // the first block's only
  g.infer_shapes();
  g.verify();
  EXPECT_EQ(op_sequence(g),
            (std::vector<std::string>{"Conv", "Relu", "Conv", "Conv", "Conv", "Add"}));
  ASSERT_EQ(g.nodes[3].inputs.size(), 4u);  // the fused second Conv
  g.nodes[3].inputs[3] = "bias";            // (1, 16, 1, 1) where Y is (2, 16, 8, 8)
  try {
    g.infer_shapes();
    FAIL() << "a residual of another shape was accepted";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("must have Y's shape"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pipetrain
