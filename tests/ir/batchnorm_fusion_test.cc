// The BatchNormalization fusion passes (ir/passes/fusion.h): BatchNorm ->
// Relu and BatchNorm -> Add (-> Relu) as one node, in training and in
// inference mode. Where the fused nodes stand, what is left alone, and that
// the outputs, the loss and every parameter gradient are the unfused graph's
// bits on the CPU backend (blocked layouts included) and the portable one:
// the fused kernels add and clip in the unfused nodes' order and arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/passes/fusion.h"
#include "tests/autodiff/grad_check.h"
#include "tests/ir/fusion_test_util.h"

namespace pipetrain {
namespace {

using ir::Attribute;
using test::compare_outputs;
using test::compare_training;
using test::op_sequence;

// x (2, 16, 8, 8) -> Conv -> BatchNorm -> Relu -> Conv -> BatchNorm ->
// Add(x, .) -> Relu -> y: ResNet's basic block as its exporter writes it.
// 16 channels, so the CPU's blocked layout holds the intermediates (the
// residual x is the plain graph input; `residual` "a1", the first ReLU's
// output, is blocked where Y, a graph output, is not). `training`: the
// BatchNorms normalise
// with the batch statistics (a training export); else with their running
// statistics (an inference export, left unfolded by fuse() without
// `inference`).
ir::Graph basic_block(bool training, const std::string& residual = "x") {
  std::mt19937_64 rng(17);
  ir::Graph g;
  g.set_tensor({"x", ir::DType::kF32, {2, 16, 8, 8}, ir::Role::kInput});
  g.inputs = {"x"};
  auto value = [&](const std::string& name, ir::Shape shape, test::Gen gen, ir::Role role) {
    g.set_value(name, test::random_tensor(shape, gen, rng), role);
  };
  value("w1", {16, 16, 3, 3}, test::Gen::kUniform, ir::Role::kParam);
  value("w2", {16, 16, 3, 3}, test::Gen::kUniform, ir::Role::kParam);
  for (const std::string bn : {"bn1", "bn2"}) {
    value(bn + ".scale", {16}, test::Gen::kUniform, ir::Role::kParam);
    value(bn + ".bias", {16}, test::Gen::kUniform, ir::Role::kParam);
    value(bn + ".mean", {16}, test::Gen::kUniform, ir::Role::kBuffer);
    value(bn + ".var", {16}, test::Gen::kPositive, ir::Role::kBuffer);
  }
  const std::map<std::string, Attribute> pads = {
      {"pads", Attribute(std::vector<int64_t>{1, 1, 1, 1})}};
  auto bn_node = [&](const std::string& bn, const std::string& in, const std::string& out) {
    std::map<std::string, Attribute> attrs = {{"epsilon", Attribute(1e-5f)}};
    std::vector<std::string> outs = {out};
    if (training) {
      attrs["training_mode"] = Attribute(int64_t{1});
      outs.push_back(bn + "/running_mean");
      outs.push_back(bn + "/running_var");
    }
    g.nodes.push_back({"/" + bn + "/BatchNormalization",
                       "BatchNormalization",
                       {in, bn + ".scale", bn + ".bias", bn + ".mean", bn + ".var"},
                       outs,
                       attrs});
  };
  g.nodes.push_back({"/c1/Conv", "Conv", {"x", "w1"}, {"h1"}, pads});
  bn_node("bn1", "h1", "n1");
  g.nodes.push_back({"/r1/Relu", "Relu", {"n1"}, {"a1"}, {}});
  g.nodes.push_back({"/c2/Conv", "Conv", {"a1", "w2"}, {"h2"}, pads});
  bn_node("bn2", "h2", "n2");
  g.nodes.push_back({"/add/Add", "Add", {residual, "n2"}, {"s"}, {}});
  g.nodes.push_back({"/r2/Relu", "Relu", {"s"}, {"y"}, {}});
  g.outputs = {"y"};
  g.infer_shapes();
  g.verify();
  return g;
}

void expect_same_bits(const std::string& what, const ir::Tensor& got, const ir::Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double top = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    EXPECT_EQ(got.at(i), want.at(i)) << what << " element " << i;
    top = std::max(top, std::abs(want.at(i)));
  }
  EXPECT_GT(top, 0.0) << what;  // something flowed through the ReLUs
}

// Training: BatchNorm -> Relu and BatchNorm -> Add -> Relu each become one
// BatchNormalization (the Convs before them stay: a training BatchNorm
// cannot fold), which keeps its running-statistics outputs.
TEST(BatchNormFusion, ResNetBlockTrainsToTheUnfusedBits) {
  ir::Graph plain = basic_block(true), fused = basic_block(true);
  const ir::passes::FusionCounts counts = ir::passes::fuse(fused);
  EXPECT_EQ(counts.batchnorm_relu, 1);
  EXPECT_EQ(counts.batchnorm_add, 1);
  EXPECT_EQ(counts.conv_relu + counts.conv_add + counts.conv_batchnorm, 0);
  fused.infer_shapes();
  fused.verify();
  EXPECT_EQ(op_sequence(fused),
            (std::vector<std::string>{"Conv", "BatchNormalization", "Conv", "BatchNormalization"}));
  const ir::Node& bn1 = fused.nodes[1];
  EXPECT_EQ(bn1.attr_string("activation", ""), "Relu");
  EXPECT_EQ(bn1.outputs, (std::vector<std::string>{"a1", "bn1/running_mean", "bn1/running_var"}));
  const ir::Node& bn2 = fused.nodes[3];
  EXPECT_EQ(bn2.inputs.size(), 6u);
  EXPECT_EQ(bn2.inputs[5], "x");
  EXPECT_EQ(bn2.attr_string("activation", ""), "Relu");
  EXPECT_EQ(bn2.outputs[0], "y");
  compare_outputs(plain, fused, 3, [](const ir::Tensor& got, const ir::Tensor& want) {
    expect_same_bits("y", got, want);
  });
  compare_training(plain, fused, 3, expect_same_bits);
  test::expect_split_inverts_fuse(plain, fused, 2);  // as the exporter writes it
}

// The residual in another layout than Y (a blocked intermediate added to a
// row-major graph output), so the fused BatchNorm adds it across layouts.
TEST(BatchNormFusion, AResidualLaidOutUnlikeYTrainsToTheUnfusedBits) {
  ir::Graph plain = basic_block(true, "a1"), fused = basic_block(true, "a1");
  EXPECT_EQ(ir::passes::fuse(fused).batchnorm_add, 1);
  fused.infer_shapes();
  fused.verify();
  EXPECT_EQ(fused.nodes[3].inputs[5], "a1");
  compare_outputs(plain, fused, 7, [](const ir::Tensor& got, const ir::Tensor& want) {
    expect_same_bits("y", got, want);
  });
  compare_training(plain, fused, 7, expect_same_bits);
}

// Inference mode (frozen statistics): the same fusions, and the gradient
// through the affine map the BatchNorm then is.
TEST(BatchNormFusion, InferenceModeBatchNormFusesAndDifferentiatesToTheUnfusedBits) {
  ir::Graph plain = basic_block(false), fused = basic_block(false);
  const ir::passes::FusionCounts counts = ir::passes::fuse(fused);
  EXPECT_EQ(counts.batchnorm_relu, 1);
  EXPECT_EQ(counts.batchnorm_add, 1);
  fused.infer_shapes();
  fused.verify();
  compare_outputs(plain, fused, 5, [](const ir::Tensor& got, const ir::Tensor& want) {
    expect_same_bits("y", got, want);
  });
  compare_training(plain, fused, 5, expect_same_bits);
}

// A BatchNorm whose output another node reads too stays as it is; an Add
// that broadcasts is no residual; a residual of another shape is refused
// by the schema, an activation other than Relu too.
TEST(BatchNormFusion, LeavesSharedOutputsAndBroadcastsAloneAndTheSchemaChecks) {
  {
    ir::Graph g = basic_block(true);
    g.outputs.push_back("n1");  // the first BatchNorm's output is read outside the pair
    g.outputs.push_back("n2");
    const ir::passes::FusionCounts counts = ir::passes::fuse(g);
    EXPECT_EQ(counts.batchnorm_relu + counts.batchnorm_add, 0);
  }
  {
    ir::Graph g = basic_block(true);
    std::mt19937_64 rng(3);
    g.set_value("bias", test::random_tensor({1, 16, 1, 1}, test::Gen::kUniform, rng),
                ir::Role::kParam);
    g.nodes[5].inputs[0] = "bias";  // Add(bias, n2): a broadcast
    g.infer_shapes();
    const ir::passes::FusionCounts counts = ir::passes::fuse(g);
    EXPECT_EQ(counts.batchnorm_relu, 1);
    EXPECT_EQ(counts.batchnorm_add, 0);
  }
  ir::Graph g = basic_block(true);
  ir::passes::fuse(g);
  g.nodes[3].inputs[5] = "w1";  // (16, 16, 3, 3) where X is (2, 16, 8, 8)
  test::expect_refused(g, "must have X's shape");
  g.nodes[3].inputs[5] = "x";
  g.nodes[3].attrs["activation"] = Attribute(std::string("Sigmoid"));
  test::expect_refused(g, "Relu only");
}

}  // namespace
}  // namespace pipetrain
