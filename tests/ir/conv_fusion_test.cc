// The convolution fusion passes (ir/passes/fusion.h): Conv + Relu and Conv
// + residual Add (+ Relu) for training and inference, Conv + BatchNorm for
// inference. What they match and leave alone, where the fused nodes stand,
// and that outputs, the loss and every parameter gradient match the unfused
// graph's on the CPU and the portable backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "autodiff/autodiff.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "ir/passes/fusion.h"
#include "tests/autodiff/grad_check.h"
#include "tests/executor/op_test_util.h"
#include "tests/ir/fusion_test_util.h"

namespace pipetrain {
namespace {

using ir::Attribute;
using test::compare_outputs;
using test::compare_training;
using test::op_sequence;

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

// Conv + ReLU: the fused Conv gives the unfused pair's outputs on the CPU
// backend (oneDNN's post-op) and the portable one (the shared kernels),
// exactly: the same convolution, then max(y, 0). Its gradient is the
// pair's (ReluGrad from Y, then ConvGrad), so training gives the same bits.
TEST(ConvFusion, ConvReluMatchesTheUnfusedPairForwardAndBackward) {
  ir::Graph plain = conv_block(false), fused = conv_block(false);
  EXPECT_EQ(ir::passes::fuse(fused).conv_relu, 2);
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
  compare_training(plain, fused, 4,
                   [](const std::string& what, const ir::Tensor& got, const ir::Tensor& want) {
                     ASSERT_EQ(got.shape(), want.shape()) << what;
                     double top = 0;
                     for (int64_t i = 0; i < want.numel(); ++i) {
                       EXPECT_EQ(got.at(i), want.at(i)) << what << " element " << i;
                       top = std::max(top, std::abs(want.at(i)));
                     }
                     EXPECT_GT(top, 0.0) << what;  // a gradient flowed through both ReLUs
                   });
}

TEST(ConvFusion, ConvReluLeavesAConvOutputOthersRead) {
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
TEST(ConvFusion, ConvBatchNormFoldsIntoTheConvForForwardOnlyRuns) {
  ir::Graph plain = conv_bn_block(), fused = conv_bn_block(), twice = conv_bn_block();
  const ir::passes::FusionCounts training = ir::passes::fuse(twice);
  EXPECT_EQ(training.conv_batchnorm, 0);  // not without `inference`
  EXPECT_EQ(training.batchnorm_relu, 1);
  // A BatchNorm fused with its ReLU still folds, and hands the ReLU on.
  EXPECT_EQ(ir::passes::fuse(twice, /*inference=*/true).conv_batchnorm, 2);
  twice.infer_shapes();
  EXPECT_EQ(op_sequence(twice), (std::vector<std::string>{"Conv", "Conv"}));
  EXPECT_EQ(twice.nodes[0].attr_string("activation", ""), "Relu");
  const ir::passes::FusionCounts counts = ir::passes::fuse(fused, /*inference=*/true);
  EXPECT_EQ(counts.conv_batchnorm, 2);
  EXPECT_EQ(counts.conv_relu, 1);
  fused.infer_shapes();
  fused.verify();
  EXPECT_EQ(op_sequence(fused), (std::vector<std::string>{"Conv", "Conv"}));
  EXPECT_EQ(fused.nodes[0].attr_string("activation", ""), "Relu");
  EXPECT_EQ(fused.nodes[1].outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(fused.nodes[1].inputs.size(), 3u);  // the folded bias, though the Conv had none
  for (const ir::Graph* g : {&fused, &twice})
    compare_outputs(plain, *g, 6, [](const ir::Tensor& got, const ir::Tensor& want) {
      EXPECT_LE(test::closeness(got, want, 1e-5, 1e-5), 1.0);
    });
}

TEST(ConvFusion, ConvBatchNormStaysWhereTheBatchNormIsTrainingOrOthersReadTheConv) {
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

// Conv + Add (+ Relu): each residual Add (and the
// Relu after it) goes into the Conv before it, placed where the Add stood
// (after the downsample Conv it reads). The outputs match the unfused
// graph's on the CPU and the portable backend within the rounding of the
// three-term sum conv + bias + residual taken in another order: oneDNN's
// brgemm kernels (AVX-512) add the residual last, as the Add does, and give
// the unfused bits; its AVX2 kernels accumulate onto the residual and differ
// by an ulp or two (ONEDNN_MAX_CPU_ISA=AVX2 shows it on any CPU); 8 ulps of
// the largest output bound both.
TEST(ConvFusion, ConvAddReluMatchesTheUnfusedNodesForwardAndBackward) {
  ir::Graph plain = residual_block(), fused = residual_block();
  const ir::passes::FusionCounts counts = ir::passes::fuse(fused);
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
  test::expect_split_inverts_fuse(plain, fused, 3);  // as the exporter writes it
  // Training: the residual's gradient is the sum's, the downsample Conv's
  // weight gets it through the fused Conv's input 3. The forward differs by
  // the ulps above, each gradient by as much of its largest element (a
  // couple of dozen products and sums deep).
  compare_training(plain, fused, 8,
                   [](const std::string& what, const ir::Tensor& got, const ir::Tensor& want) {
                     ASSERT_EQ(got.shape(), want.shape()) << what;
                     double top = 0;
                     for (int64_t i = 0; i < want.numel(); ++i)
                       top = std::max(top, std::abs(want.at(i)));
                     ASSERT_GT(top, 0.0) << what;
                     const double tol = std::ldexp(top, -17);  // 64 ulps of the largest
                     for (int64_t i = 0; i < want.numel(); ++i)
                       EXPECT_NEAR(got.at(i), want.at(i), tol) << what << " element " << i;
                   });
}

// An Add that broadcasts (a per-channel value) is no residual: it stays,
// and the Conv before it with it; a residual of another shape is refused
// by the schema.
TEST(ConvFusion, ConvAddLeavesABroadcastAddAndTheSchemaChecksTheResidual) {
  ir::Graph g = residual_block(/*broadcast_bias=*/true);
  EXPECT_EQ(ir::passes::fuse_conv_add(g), 1);  // the first block's only
  g.infer_shapes();
  g.verify();
  EXPECT_EQ(op_sequence(g),
            (std::vector<std::string>{"Conv", "Relu", "Conv", "Conv", "Conv", "Add"}));
  ASSERT_EQ(g.nodes[3].inputs.size(), 4u);  // the fused second Conv
  g.nodes[3].inputs[3] = "bias";            // (1, 16, 1, 1) where Y is (2, 16, 8, 8)
  test::expect_refused(g, "must have Y's shape");
}

}  // namespace
}  // namespace pipetrain
