// If, Loop and Scan inlined at import (importer/control_flow.cc): the taken
// branch, unrolled loops with carried state, scan outputs and outer-scope
// reads, a loop nested in a branch, and the refusals of dynamic forms.
#include <gtest/gtest.h>

#include <algorithm>

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "tests/importer/model_util.h"

namespace pipetrain {
namespace {

using test::error_of;

std::map<std::string, ir::Tensor> run(const std::string& text,
                                      std::map<std::string, ir::Tensor> feeds) {
  ir::Graph g = test::import_text(text);
  for (const auto& n : g.nodes)
    EXPECT_TRUE(n.op_type != "If" && n.op_type != "Loop" && n.op_type != "Scan") << n.name;
  auto backend = exec::make_cpu_backend();
  return exec::ForwardRunner(g, *backend).run(feeds);
}

std::vector<float> values(const ir::Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// x -> If(true): then x * w (reads w from outside), else x + w.
TEST(ControlFlow, IfTakesTheBranchOfItsConstantCondition) {
  for (const char* cond : {"1", "0"}) {
    const std::string text = std::string(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
<bool c = {)") + cond + R"(}, float[2] w = {3, 4}>
{
  y = If (c) <
    then_branch = t () => (float[2] a) { a = Mul(x, w) },
    else_branch = e () => (float[2] b) { b = Add(x, w) }>
}
)";
    const auto out = run(text, {{"x", ir::Tensor::from_f32({1, 2}, {2})}});
    EXPECT_EQ(values(out.at("y")),
              std::string(cond) == "1" ? (std::vector<float>{3, 8}) : (std::vector<float>{4, 6}))
        << cond;
  }
}

// s <- s * 2 + i for i in 0..2, scan output s each step; the body reads k from outside.
TEST(ControlFlow, LoopUnrollsCarriedStateAndScanOutputs) {
  const auto out = run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] s0) => (float[2] s, float[3, 2] trace)
<int64 m = {3}, bool go = {1}, float k = {2}>
{
  s, trace = Loop (m, go, s0) <body = b (int64 i, bool c_in, float[2] s_in) => (bool c_out, float[2] s_out, float[2] t) {
    c_out = Identity(c_in)
    two = Mul(s_in, k)
    fi = Cast<to = 1>(i)
    s_out = Add(two, fi)
    t = Identity(s_out)
  }>
}
)",
                       {{"s0", ir::Tensor::from_f32({1, -1}, {2})}});
  // (1, -1) -> (2, -2) -> (5, -3) -> (12, -4)
  EXPECT_EQ(values(out.at("s")), (std::vector<float>{12, -4}));
  EXPECT_EQ(values(out.at("trace")), (std::vector<float>{2, -2, 5, -3, 12, -4}));
}

// A running sum over the rows of x, in reverse, with the partial sums stacked.
TEST(ControlFlow, ScanUnrollsOverTheScanAxisInEitherDirection) {
  const auto out = run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] init, float[3, 2] x) => (float[2] total, float[3, 2] partial)
{
  total, partial = Scan (init, x) <num_scan_inputs = 1, scan_input_directions = [1],
    body = b (float[2] acc, float[2] row) => (float[2] acc_out, float[2] seen) {
      acc_out = Add(acc, row)
      seen = Identity(acc_out)
    }>
}
)",
                       {{"init", ir::Tensor::from_f32({0, 0}, {2})},
                        {"x", ir::Tensor::from_f32({1, 2, 3, 4, 5, 6}, {3, 2})}});
  EXPECT_EQ(values(out.at("total")), (std::vector<float>{9, 12}));
  EXPECT_EQ(values(out.at("partial")), (std::vector<float>{5, 6, 8, 10, 9, 12}));
}

// Scan in its opset-8 form: batched on axis 0, `directions`, no sequence_lens
// (the empty first input). Each batch entry runs its own scan; the body reads
// k from outside. Entry 0 sums its rows in reverse, entry 1 likewise.
TEST(ControlFlow, BatchedOpset8ScanRunsEachEntryOnItsOwn) {
  onnx::ModelProto m = test::parse_model(R"(
<ir_version: 4, opset_import: ["" : 8]>
g (float[2, 2] init, float[2, 3, 2] x) => (float[2, 2] total, float[2, 3, 2] partial)
<float k = {10}>
{
  total, partial = Scan (init, x) <num_scan_inputs = 1, directions = [1],
    body = b (float[2] acc, float[2] row) => (float[2] acc_out, float[2] seen) {
      acc_out = Add(acc, row)
      seen = Mul(acc_out, k)
    }>
}
)");
  // The text syntax cannot open an input list with an empty name: sequence_lens left out.
  auto* inputs = m.mutable_graph()->mutable_node(0)->mutable_input();
  inputs->Add("");
  std::rotate(inputs->rbegin(), inputs->rbegin() + 1, inputs->rend());
  ir::Graph g = test::import_proto(m);
  for (const auto& n : g.nodes) EXPECT_NE(n.op_type, "Scan") << n.name;
  auto backend = exec::make_cpu_backend();
  const auto out =
      exec::ForwardRunner(g, *backend)
          .run(
              {{"init", ir::Tensor::from_f32({0, 0, 100, 200}, {2, 2})},
               {"x", ir::Tensor::from_f32({1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6}, {2, 3, 2})}});
  EXPECT_EQ(values(out.at("total")), (std::vector<float>{9, 12, 91, 188}));
  EXPECT_EQ(values(out.at("partial")),
            (std::vector<float>{50, 60, 80, 100, 90, 120, 950, 1940, 920, 1900, 910, 1880}));
}

// A counted loop inside the taken branch, both reading x from the top level.
TEST(ControlFlow, NestedBodiesReadTheOuterScope) {
  const auto out = run(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
<bool c = {1}, int64 m = {2}>
{
  y = If (c) <
    then_branch = t () => (float[2] a) {
      a = Loop (m, , x) <body = b (int64 i, bool ci, float[2] v) => (bool co, float[2] w) {
        co = Identity(ci)
        w = Add(v, x)
      }>
    },
    else_branch = e () => (float[2] b2) { b2 = Identity(x) }>
}
)",
                       {{"x", ir::Tensor::from_f32({1, 2}, {2})}});
  EXPECT_EQ(values(out.at("y")), (std::vector<float>{3, 6}));
}

TEST(ControlFlow, DynamicFormsAreRefusedNamingTheNode) {
  auto msg = error_of<UnsupportedOp>([] {
    test::import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, bool c) => (float[2] y)
{
  y = If (c) <
    then_branch = t () => (float[2] a) { a = Identity(x) },
    else_branch = e () => (float[2] b) { b = Neg(x) }>
}
)");
  });
  EXPECT_NE(msg.find("If node"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the condition 'c' is not a constant"), std::string::npos) << msg;
  msg = error_of<UnsupportedOp>([] {
    test::import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, int64 m) => (float[2] y)
{
  y = Loop (m, , x) <body = b (int64 i, bool ci, float[2] v) => (bool co, float[2] w) {
    co = Identity(ci)
    w = Neg(v)
  }>
}
)");
  });
  EXPECT_NE(msg.find("the trip count 'm' is not a constant"), std::string::npos) << msg;
  msg = error_of<UnsupportedOp>([] {
    test::import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
<bool go = {1}, int64 m = {4}>
{
  y = Loop (m, go, x) <body = b (int64 i, bool ci, float[2] v) => (bool co, float[2] w) {
    w = Neg(v)
    s = ReduceSum<keepdims = 0>(w)
    zero = Constant<value_float = 0.0>()
    co = Less(s, zero)
  }>
}
)");
  });
  EXPECT_NE(msg.find("its body computes the loop condition"), std::string::npos) << msg;
}

}  // namespace
}  // namespace pipetrain
