// The blocked-layout plan: which activations stay in oneDNN's convolution
// layout between kernels, that the plan keeps graph outputs and everything a
// layout-blind kernel reads row-major, and that a run with the plan gives
// bitwise the outputs of one without it (forward and training step).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "autodiff/training_graph.h"
#include "executor/backend.h"
#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/forward_runner.h"
#include "executor/layout_plan.h"
#include "importer/importer.h"
#include "models/zoo.h"
#include "tests/autodiff/grad_check.h"
#include "tests/executor/test_models.h"

namespace pipetrain {
namespace {

using testing_models::node;
using testing_models::wave;
using Tensors = std::map<std::string, ir::Tensor>;

ir::Node with_attrs(ir::Node n, std::map<std::string, ir::Attribute> attrs) {
  n.attrs = std::move(attrs);
  return n;
}

// x (2, 3, 12, 12) -> Conv+bias -> Relu -> MaxPool -> [Conv -> Add(., pooled) -> Mul 0.5
// -> Relu] -> grouped strided Conv -> Add bias (1, 16, 1, 1) -> GlobalAveragePool -> out;
// the block's Relu also feeds a second GlobalAveragePool -> out2.
ir::Graph conv_block(const std::vector<std::string>& outputs) {
  ir::Graph g;
  g.name = "conv_block";
  g.set_tensor({"x", ir::DType::kF32, {2, 3, 12, 12}, ir::Role::kInput});
  g.inputs = {"x"};
  g.set_value("w0", wave({16, 3, 3, 3}, 0.1, 0.4), ir::Role::kParam);
  g.set_value("b0", wave({16}, 0.2, 0.1), ir::Role::kParam);
  g.set_value("w1", wave({16, 16, 3, 3}, 0.3, 0.2), ir::Role::kParam);
  g.set_value("w2", wave({16, 8, 3, 3}, 0.4, 0.2), ir::Role::kParam);
  g.set_value("b4", wave({1, 16, 1, 1}, 0.5, 0.1), ir::Role::kParam);
  g.set_value("half", ir::Tensor::from_f32({0.5f}, {}), ir::Role::kConstant);
  const std::vector<int64_t> pad1 = {1, 1, 1, 1};
  g.nodes = {
      with_attrs(node("conv0", "Conv", {"x", "w0", "b0"}, {"c0"}), {{"pads", pad1}}),
      node("relu0", "Relu", {"c0"}, {"r0"}),
      with_attrs(
          node("pool", "MaxPool", {"r0"}, {"p"}),
          {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}}),
      with_attrs(node("conv1", "Conv", {"p", "w1"}, {"c1"}), {{"pads", pad1}}),
      node("add", "Add", {"c1", "p"}, {"s"}),
      node("mul", "Mul", {"s", "half"}, {"m"}),
      node("relu1", "Relu", {"m"}, {"r1"}),
      with_attrs(node("conv2", "Conv", {"r1", "w2"}, {"c2"}),
                 {{"pads", pad1}, {"strides", std::vector<int64_t>{2, 2}}, {"group", int64_t{2}}}),
      node("bias", "Add", {"c2", "b4"}, {"c3"}),
      node("gap", "GlobalAveragePool", {"c3"}, {"out"}),
      node("gap2", "GlobalAveragePool", {"r1"}, {"out2"}),
  };
  g.outputs = outputs;
  g.infer_shapes();
  g.verify();
  return g;
}

bool blocked_layout_available() {
  return exec::cpu::channel_block(16) > 0;
}

void expect_bitwise(const Tensors& got, const Tensors& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, t] : want) {
    const ir::Tensor& o = got.at(name);
    ASSERT_EQ(o.nbytes(), t.nbytes()) << what << ": " << name;
    EXPECT_EQ(std::memcmp(o.raw(), t.raw(), t.nbytes()), 0) << what << ": " << name << " differs";
  }
}

// Runs g with and without the blocked layout, planned and unplanned memory,
// twice each (the second run finds dirty buffers), and compares all outputs.
void expect_layout_blind(const ir::Graph& g, const Tensors& feeds) {
  auto plain_backend = exec::make_cpu_backend({/*blocked_layout=*/false});
  auto blocked_backend = exec::make_cpu_backend();
  const Tensors want = exec::ForwardRunner(g, *plain_backend).run(feeds);
  for (bool plan_memory : {false, true}) {
    exec::ForwardRunner runner(g, *blocked_backend, plan_memory);
    if (plan_memory) runner.poison_arena();
    for (int rep = 0; rep < 2; ++rep)
      expect_bitwise(
          runner.run(feeds), want,
          std::string(plan_memory ? "planned" : "unplanned") + " run " + std::to_string(rep));
  }
}

TEST(LayoutPlan, KeepsConvChainsBlockedAndBroadcastsAndOutputsPlain) {
  if (!blocked_layout_available())
    GTEST_SKIP() << "oneDNN computes in no channel-blocked layout here";
  ir::Graph g = conv_block({"out", "out2"});
  auto backend = exec::make_cpu_backend();
  exec::LayoutPlan plan = exec::plan_blocked_layout(g, *backend, {"out", "out2"});
  // c2 feeds a broadcast Add (layout-blind), c3 comes from it, x is a graph
  // input, out and out2 are graph outputs.
  EXPECT_EQ(plan.tensors, (std::set<std::string>{"c0", "r0", "p", "c1", "s", "m", "r1"}));
  auto conv2 = std::find_if(g.nodes.begin(), g.nodes.end(),
                            [](const ir::Node& n) { return n.name == "conv2"; }) -
               g.nodes.begin();
  EXPECT_EQ(plan.inputs[conv2], 1u) << "conv2 reads r1 blocked";
  EXPECT_EQ(plan.outputs[conv2], 0u) << "conv2 writes c2 row-major";
}

TEST(LayoutPlan, AGraphOutputInsideTheChainUnblocksAllThatShareItsLayout) {
  if (!blocked_layout_available())
    GTEST_SKIP() << "oneDNN computes in no channel-blocked layout here";
  // r0 goes back to the caller row-major: MaxPool must read it so, so p is
  // plain, so the Add and everything elementwise after it is, and c0 (read by
  // relu0) too. Nothing is left.
  ir::Graph g = conv_block({"out", "out2", "r0"});
  auto backend = exec::make_cpu_backend();
  auto plan = exec::plan_blocked_layout(g, *backend, {"out", "out2", "r0"});
  EXPECT_TRUE(plan.empty()) << plan.tensors.size() << " tensors blocked";
}

TEST(LayoutPlan, NothingIsBlockedWhenTheBackendSaysNo) {
  ir::Graph g = conv_block({"out", "out2"});
  auto backend = exec::make_cpu_backend({/*blocked_layout=*/false});
  EXPECT_TRUE(exec::plan_blocked_layout(g, *backend, {}).empty());
}

TEST(LayoutPlan, BlockedRunsEqualPlainRunsBitwise) {
  if (!blocked_layout_available())
    GTEST_SKIP() << "oneDNN computes in no channel-blocked layout here";
  ir::Graph g = conv_block({"out", "out2"});
  expect_layout_blind(g, {{"x", wave({2, 3, 12, 12}, 0.7, 1.0)}});
}

// MaxPoolGrad between blocked tensors over overlapping, padded windows (an
// input element is the maximum of up to four windows, whose gradients add in
// the output order): bitwise the row-major kernel, with distinct values and
// with every window tied (w0 = 0: the first tap wins).
// Overlapping 3x3/2 windows with padding (the general blocked kernel) and
// the halving 2x2/2 and 1x2/2 windows (their own blocked kernel), over
// inputs the windows cover and odd ones they do not; w0 = 0 ties every tap.
TEST(LayoutPlan, MaxPoolGradOverOverlappingWindowsIsBitwiseThatOfTheRowMajorKernel) {
  if (!blocked_layout_available())
    GTEST_SKIP() << "oneDNN computes in no channel-blocked layout here";
  const std::vector<int64_t> pad1 = {1, 1, 1, 1};
  const std::vector<std::map<std::string, ir::Attribute>> pools = {
      {{"kernel_shape", std::vector<int64_t>{3, 3}},
       {"strides", std::vector<int64_t>{2, 2}},
       {"pads", pad1}},
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}},
      {{"kernel_shape", std::vector<int64_t>{1, 2}}, {"strides", std::vector<int64_t>{1, 2}}}};
  for (const auto& pool : pools)
    for (const ir::Shape& xs : {ir::Shape{2, 3, 9, 11}, ir::Shape{2, 3, 8, 10}})
      for (double w0_scale : {0.4, 0.0}) {
        SCOPED_TRACE(ir::shape_str(xs) + " kernel " +
                     ir::shape_str(std::get<std::vector<int64_t>>(pool.at("kernel_shape"))) +
                     " w0 x " + std::to_string(w0_scale));
        ir::Graph g;
        g.set_tensor({"x", ir::DType::kF32, xs, ir::Role::kInput});
        g.inputs = {"x"};
        g.set_value("w0", wave({16, 3, 3, 3}, 0.1, w0_scale), ir::Role::kParam);
        g.set_value("b0", wave({16}, 0.2, 0.1), ir::Role::kParam);
        g.set_value("w1", wave({16, 16, 3, 3}, 0.3, 0.2), ir::Role::kParam);
        g.set_value("w2", wave({8, 16, 3, 3}, 0.4, 0.2), ir::Role::kParam);
        g.nodes = {
            with_attrs(node("conv0", "Conv", {"x", "w0", "b0"}, {"c0"}), {{"pads", pad1}}),
            node("relu0", "Relu", {"c0"}, {"r0"}),
            with_attrs(node("pool", "MaxPool", {"r0"}, {"p"}), pool),
            with_attrs(node("conv1", "Conv", {"p", "w1"}, {"dp"}), {{"pads", pad1}}),
            with_attrs(node("pool_grad", "MaxPoolGrad", {"dp", "r0"}, {"dr0"}), pool),
            with_attrs(node("conv2", "Conv", {"dr0", "w2"}, {"c2"}), {{"pads", pad1}}),
            node("gap", "GlobalAveragePool", {"c2"}, {"out"}),
        };
        g.outputs = {"out"};
        g.infer_shapes();
        g.verify();
        auto backend = exec::make_cpu_backend();
        EXPECT_EQ(exec::plan_blocked_layout(g, *backend, {"out"}).tensors,
                  (std::set<std::string>{"c0", "r0", "p", "dp", "dr0", "c2"}));
        expect_layout_blind(g, {{"x", wave(xs, 0.7, 1.0)}});
      }
}

TEST(LayoutPlan, ConversionsRoundTrip) {
  if (!blocked_layout_available())
    GTEST_SKIP() << "oneDNN computes in no channel-blocked layout here";
  const ir::Shape s = {2, 16, 3, 5};
  ir::Tensor x = wave(s, 0.3, 1.0);
  std::vector<float> blocked(static_cast<size_t>(x.numel())), back(blocked.size());
  exec::cpu::to_blocked(x.data<float>(), blocked.data(), s);
  exec::cpu::from_blocked(blocked.data(), back.data(), s);
  EXPECT_EQ(std::memcmp(back.data(), x.raw(), x.nbytes()), 0);
  // Element (n, c, h, w) = (1, 9, 2, 4) where the layout formula puts it.
  const int64_t b = exec::cpu::channel_block(16), n = 1, c = 9, h = 2, w = 4;
  const int64_t at = (((n * 16 / b + c / b) * 3 + h) * 5 + w) * b + c % b;
  EXPECT_EQ(blocked[static_cast<size_t>(at)], x.data<float>()[((n * 16 + c) * 3 + h) * 5 + w]);
}

// A zoo model at an eighth of its width, batch 2, 10 classes, imported with
// the training passes on.
ir::Graph small_zoo_model(const std::string& name, int64_t image_size, uint64_t seed) {
  models::ZooOptions opts;
  opts.batch = 2;
  opts.image_size = image_size;
  opts.width_divisor = 8;
  opts.num_classes = 10;
  opts.seed = seed;
  onnx::ModelProto proto = models::build_zoo_model(name, opts);
  return importer::import_model_bytes(proto.SerializeAsString(), ".", {});
}

// A small VGG (convolution, ReLU and max-pool chains), forward as an
// inference run and as a whole training step with its gradients.
TEST(LayoutPlan, SmallVggForwardAndTrainingStepAreBitwiseThoseWithoutIt) {
  if (!blocked_layout_available())
    GTEST_SKIP() << "oneDNN computes in no channel-blocked layout here";
  ir::Graph model = small_zoo_model("vgg16", 224, 3);
  auto backend = exec::make_cpu_backend();
  std::set<std::string> outputs(model.outputs.begin(), model.outputs.end());
  // The outputs of 12 of the 13 convolutions (each fused with its ReLU) and
  // of the 4 max-pools between them: the last Conv and max-pool meet the
  // row-major classifier.
  EXPECT_GE(exec::plan_blocked_layout(model, *backend, outputs).tensors.size(), 16u)
      << "vgg16's convolution chains should stay blocked";
  std::mt19937_64 rng(11);
  ir::Tensor x = test::random_tensor(model.tensor(model.inputs[0]).shape, test::Gen::kUniform, rng);
  expect_layout_blind(model, {{model.inputs[0], x}});

  autodiff::TrainingGraph tg = autodiff::build_training_graph(model, {"cross-entropy", ""});
  // The backward keeps it too: all ConvGrads but the first (whose X is the
  // image, and which has no dX) read X and write dX blocked; all but the
  // last read dY blocked, as the gradients of all ReLUs and max-pools but
  // the last (its output and gradient meet the row-major classifier).
  const ir::Graph& tgg = tg.graph;
  auto plan = exec::plan_blocked_layout(
      tgg, *backend, std::set<std::string>(tgg.outputs.begin(), tgg.outputs.end()));
  int conv_grads = 0, dy_in = 0, x_in = 0, dx_out = 0, relu_grads = 0, pool_grads = 0;
  for (size_t i = 0; i < tgg.nodes.size(); ++i) {
    const ir::Node& n = tgg.nodes[i];
    if (n.op_type == "ConvGrad") {
      ++conv_grads;
      dy_in += plan.inputs[i] & 1u;
      x_in += (plan.inputs[i] >> 1) & 1u;
      dx_out += n.has_output(0) && (plan.outputs[i] & 1u);
    }
    const bool same = plan.inputs[i] == 3u && plan.outputs[i] == 1u;
    relu_grads += n.op_type == "ReluGrad" && same;
    pool_grads += n.op_type == "MaxPoolGrad" && same;
  }
  EXPECT_EQ(conv_grads, 13);
  EXPECT_EQ(x_in, 12);
  EXPECT_EQ(dx_out, 12);
  EXPECT_EQ(dy_in, 12);
  EXPECT_EQ(relu_grads, 12);
  EXPECT_EQ(pool_grads, 4);
  expect_layout_blind(tg.graph,
                      {{model.inputs[0], x}, {tg.labels, ir::Tensor::from_i64({3, 7}, {2})}});
}

// A BatchNormalization whose X or Y alone is blocked (a graph input in, a
// graph output out), and one between two blocked tensors, forward and as a
// training step: the three layouts' loops are the row-major kernels' sums and
// formulas, so the bits are theirs.
TEST(LayoutPlan, BatchNormInEitherLayoutIsBitwiseThatOfTheRowMajorKernel) {
  if (!blocked_layout_available())
    GTEST_SKIP() << "oneDNN computes in no channel-blocked layout here";
  ir::Graph g;
  g.set_tensor({"x", ir::DType::kF32, {3, 16, 7, 5}, ir::Role::kInput});
  g.inputs = {"x"};
  auto bn_params = [&](const std::string& p, double phase) {
    g.set_value(p + "_s", wave({16}, phase, 0.5), ir::Role::kParam);
    g.set_value(p + "_b", wave({16}, phase + 0.3, 0.2), ir::Role::kParam);
    g.set_value(p + "_m", wave({16}, phase + 0.6, 0.1), ir::Role::kBuffer);
    g.set_value(p + "_v", ir::Tensor::from_f32(std::vector<float>(16, 1.0f), {16}),
                ir::Role::kBuffer);
  };
  bn_params("bn0", 0.1);
  bn_params("bn1", 0.2);
  g.set_value("w", wave({16, 16, 3, 3}, 0.3, 0.2), ir::Role::kParam);
  const std::map<std::string, ir::Attribute> train = {{"training_mode", int64_t{1}}};
  g.nodes = {
      with_attrs(node("bn0", "BatchNormalization", {"x", "bn0_s", "bn0_b", "bn0_m", "bn0_v"},
                      {"y0", "bn0_m_out", "bn0_v_out"}),
                 train),
      with_attrs(node("conv", "Conv", {"y0", "w"}, {"c"}),
                 {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
      with_attrs(node("bn1", "BatchNormalization", {"c", "bn1_s", "bn1_b", "bn1_m", "bn1_v"},
                      {"y1", "bn1_m_out", "bn1_v_out"}),
                 train),
      node("relu", "Relu", {"y1"}, {"r"}),
      node("gap", "GlobalAveragePool", {"r"}, {"p"}),
      node("flat", "Flatten", {"p"}, {"logits"}),
  };
  g.outputs = {"logits", "y1"};
  g.infer_shapes();
  g.verify();
  auto backend = exec::make_cpu_backend();
  const auto plan = exec::plan_blocked_layout(g, *backend, {"logits", "y1"});
  EXPECT_EQ(plan.tensors, (std::set<std::string>{"y0", "c"}))
      << "bn0 writes y0 blocked from a row-major x; bn1 reads c blocked into a row-major y1";
  ir::Tensor x = wave({3, 16, 7, 5}, 0.7, 3.0);  // a mean far from 0 against the spread
  expect_layout_blind(g, {{"x", x}});
  g.outputs = {"logits"};
  autodiff::TrainingGraph tg = autodiff::build_training_graph(g, {"cross-entropy", ""});
  const std::set<std::string> outs(tg.graph.outputs.begin(), tg.graph.outputs.end());
  const auto tplan = exec::plan_blocked_layout(tg.graph, *backend, outs);
  int bn_grads = 0, mixed = 0;
  for (size_t i = 0; i < tg.graph.nodes.size(); ++i)
    if (tg.graph.nodes[i].op_type == "BatchNormalizationGrad") {
      ++bn_grads;
      mixed += tplan.inputs[i] != 0u && tplan.inputs[i] != 3u;
    }
  EXPECT_EQ(bn_grads, 2);
  EXPECT_GE(mixed, 1) << "bn0's gradient reads x row-major and dY blocked";
  expect_layout_blind(tg.graph, {{"x", x}, {tg.labels, ir::Tensor::from_i64({3, 7, 11}, {3})}});
}

// A ResNet (the zoo's ResNet-50 at an eighth of its width): with BatchNorm
// taking the blocked layout, its convolution chains stay blocked through the
// BatchNorms, forward and backward, and the step is bitwise the row-major one.
TEST(LayoutPlan, ResNetStaysBlockedThroughItsBatchNormsAndIsBitwise) {
  if (!blocked_layout_available())
    GTEST_SKIP() << "oneDNN computes in no channel-blocked layout here";
  ir::Graph model = small_zoo_model("resnet50", 32, 5);
  autodiff::TrainingGraph tg = autodiff::build_training_graph(model, {"cross-entropy", ""});
  const ir::Graph& g = tg.graph;
  auto backend = exec::make_cpu_backend();
  const auto plan = exec::plan_blocked_layout(
      g, *backend, std::set<std::string>(g.outputs.begin(), g.outputs.end()));
  int bns = 0, bn_x = 0, bn_y = 0, bn_grads = 0, bn_grads_blocked = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const std::string& op = g.nodes[i].op_type;
    if (op == "BatchNormalization") {
      ++bns;
      bn_x += plan.inputs[i] & 1u;
      bn_y += plan.outputs[i] & 1u;
    }
    if (op == "BatchNormalizationGrad") {
      ++bn_grads;
      bn_grads_blocked += plan.inputs[i] == 3u && plan.outputs[i] == 1u;
    }
  }
  EXPECT_EQ(bns, 53);
  EXPECT_EQ(bn_grads, 53);
  EXPECT_EQ(bn_x, 53) << "every convolution's output stays blocked into its BatchNorm";
  // All but layer4's three that end a block (each fused with its residual
  // Add and ReLU): the residuals they read and write chain to the last one,
  // whose ReluGrad reads the row-major gradient of the head's
  // GlobalAveragePool in one layout with it.
  EXPECT_EQ(bn_y, 50);
  EXPECT_EQ(bn_grads_blocked, 49);
  std::mt19937_64 rng(13);
  Tensors feeds;
  for (const auto& in : g.inputs)
    feeds[in] = g.tensor(in).dtype == ir::DType::kF32
                    ? test::random_tensor(g.tensor(in).shape, test::Gen::kUniform, rng)
                    : ir::Tensor::from_i64({3, 7}, {2});
  expect_layout_blind(g, feeds);
}

}  // namespace
}  // namespace pipetrain
