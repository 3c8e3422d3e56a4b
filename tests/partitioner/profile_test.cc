// Profile JSON and PipeDream graph.txt round trips, and the IR-derived
// profile: cut bytes with skip connections, roofline times, measured medians.
#include "partitioner/profile.h"

#include <gtest/gtest.h>

#include "ir/error.h"
#include "partitioner/graph_txt.h"
#include "partitioner/json_util.h"
#include "partitioner/profile_ir.h"

namespace pipetrain::partitioner {
namespace {

Profile three_layers() {
  Profile p;
  p.model = "m";
  p.source = "analytic";
  p.device = "v100";
  p.batch = 32;
  p.backward_estimated = true;
  p.layers = {{"a", 1e-3, 2e-3, 400, 400, 100, {"n0"}, 0},
              {"b", 2e-3, 4e-3, 800, 1200, 0, {"n1", "n2"}, 0},
              {"c", 3e-3, 6e-3, 40, 0, 300, {"n3"}, 0}};
  p.edges = {{0, 1}, {0, 2}, {1, 2}};
  return p;
}

TEST(Profile, JsonRoundTrip) {
  Profile p = three_layers();
  p.layers[1].backward_input_s = 1.5e-3;
  Profile q = profile_from_json(to_json(p));
  EXPECT_EQ(to_json(q), to_json(p));
  EXPECT_DOUBLE_EQ(q.layers[1].backward_input_s, 1.5e-3);
  EXPECT_LT(q.layers[0].backward_input_s, 0);  // not measured stays so
  EXPECT_EQ(q.layers[1].nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_TRUE(q.backward_estimated);
  EXPECT_DOUBLE_EQ(q.compute_s(), 18e-3);
  EXPECT_EQ(q.param_bytes(), 400);
}

TEST(Profile, MalformedJsonNamesTheField) {
  auto j = to_json(three_layers());
  j["layers"][1].erase("cut_bytes");
  try {
    profile_from_json(j);
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("profile layer 1: missing field 'cut_bytes'"),
              std::string::npos)
        << e.what();
  }
  j = to_json(three_layers());
  j["layers"][2]["forward_s"] = -1.0;
  EXPECT_THROW(profile_from_json(j), PlanError);
  j = to_json(three_layers());
  j["layers"][0]["backward_input_s"] = 3e-3;  // more than the whole backward
  EXPECT_THROW(profile_from_json(j), PlanError);
  j = to_json(three_layers());
  j["layers"] = nlohmann::json::array();
  EXPECT_THROW(profile_from_json(j), PlanError);
  j = to_json(three_layers());
  j["edges"] = {{2, 1}};
  EXPECT_THROW(profile_from_json(j), PlanError);
}

// A stage keeps a weight-read tensor from B to W only where one of its
// weight readers lies inside it: made in layer 0, first read by layer 1's
// input half, read by layer 2's weight half.
TEST(Profile, WeightStashCountsATensorWhereItsWeightReaderIs) {
  Profile p = three_layers();
  EXPECT_LT(p.weight_stash_bytes(1, 2), 0);  // unknown
  p.weight_reads_known = true;
  p.weight_reads = {{"relu_out", 64, 1, 2, {2}}, {"conv_in", 8, 1, 1, {1}}};
  EXPECT_EQ(p.weight_stash_bytes(1, 1), 8);   // keeps relu_out for its own B only
  EXPECT_EQ(p.weight_stash_bytes(2, 2), 64);  // received, read by its dW
  EXPECT_EQ(p.weight_stash_bytes(1, 2), 72);
  EXPECT_EQ(p.weight_stash_bytes(0, 0), 0);
  Profile q = profile_from_json(to_json(p));
  EXPECT_EQ(to_json(q), to_json(p));
  EXPECT_EQ(q.weight_stash_bytes(2, 2), 64);
  auto j = to_json(p);
  j["weight_reads"][0]["weight_readers"] = {0};  // before its first reader
  EXPECT_THROW(profile_from_json(j), PlanError);
  j = to_json(p);
  j["weight_reads"][1].erase("bytes");
  EXPECT_THROW(profile_from_json(j), PlanError);
}

// Found by json_fuzzer: numbers past int or double were wrapped, or escaped
// as nlohmann's own exceptions instead of one PlanError.
TEST(Profile, NumbersOutOfRangeAreRefusedNotWrapped) {
  auto j = to_json(three_layers());
  j["edges"] = {{0, 4294967297LL}};  // 2^32 + 1 wrapped to 1 in an int
  EXPECT_THROW(profile_from_json(j), PlanError);
  j = to_json(three_layers());
  j["layers"][0]["cut_bytes"] = 1e300;  // integral, but no int64
  EXPECT_THROW(profile_from_json(j), PlanError);
  j = to_json(three_layers());
  j["layers"][0]["cut_bytes"] = 18446744073709551615ULL;
  EXPECT_THROW(profile_from_json(j), PlanError);
  try {
    json_util::parse("{\"batch\": 1e400}", "p.json");
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: not valid JSON"), std::string::npos) << e.what();
  }
}

// The reference's format: an Input source and a __getitem__ sink are dropped;
// node3 reads node1 (a skip), so the cut after node2 carries both outputs.
const char* kGraphTxt =
    "node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, "
    "activation_size=602112.0, parameter_size=0.000\n"
    "node2 -- Conv2d(3, 64) -- forward_compute_time=1.500, backward_compute_time=3.000, "
    "activation_size=1000.0, parameter_size=7000.000\n"
    "node3 -- ReLU() -- forward_compute_time=0.250, backward_compute_time=0.500, "
    "activation_size=[300.0; 200.0], parameter_size=0.000\n"
    "node4 -- Add() -- forward_compute_time=0.125, backward_compute_time=0.125, "
    "activation_size=1000.0, parameter_size=0.000\n"
    "node5 -- __getitem__(0) -- forward_compute_time=0.000, backward_compute_time=0.000, "
    "activation_size=8.0, parameter_size=0.000\n"
    "\tnode1 -- node2\n"
    "\tnode2 -- node3\n"
    "\tnode2 -- node4\n"
    "\tnode3 -- node4\n"
    "\tnode4 -- node5\n";

TEST(GraphTxt, ReadsTheReferenceFormat) {
  Profile p = read_graph_txt(kGraphTxt);
  ASSERT_EQ(p.layers.size(), 3u);
  EXPECT_EQ(p.layers[0].name, "Conv2d(3, 64)");
  EXPECT_DOUBLE_EQ(p.layers[0].forward_s, 1.5e-3);
  EXPECT_DOUBLE_EQ(p.layers[0].backward_s, 3e-3);
  EXPECT_EQ(p.layers[0].param_bytes, 7000);
  EXPECT_EQ(p.layers[1].output_bytes, 500);  // "[300.0; 200.0]" sums
  EXPECT_EQ(p.layers[0].cut_bytes, 1000);    // node2 -> node3, node4
  EXPECT_EQ(p.layers[1].cut_bytes, 1500);    // node2 (skip) + node3 -> node4
  EXPECT_EQ(p.layers[2].cut_bytes, 0);
  EXPECT_EQ(p.edges, (std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {1, 2}}));
}

TEST(GraphTxt, WriteThenReadKeepsEverything) {
  Profile p = read_graph_txt(kGraphTxt);
  Profile q = read_graph_txt(write_graph_txt(p));
  ASSERT_EQ(q.layers.size(), p.layers.size());
  for (size_t i = 0; i < p.layers.size(); ++i) {
    EXPECT_EQ(q.layers[i].name, p.layers[i].name);
    EXPECT_NEAR(q.layers[i].forward_s, p.layers[i].forward_s, 1e-12);
    EXPECT_NEAR(q.layers[i].backward_s, p.layers[i].backward_s, 1e-12);
    EXPECT_EQ(q.layers[i].output_bytes, p.layers[i].output_bytes);
    EXPECT_EQ(q.layers[i].cut_bytes, p.layers[i].cut_bytes);
    EXPECT_EQ(q.layers[i].param_bytes, p.layers[i].param_bytes);
  }
  EXPECT_EQ(q.edges, p.edges);
}

TEST(GraphTxt, BadInputNamesTheLine) {
  EXPECT_THROW(read_graph_txt(""), PlanError);
  try {
    read_graph_txt(
        "node1 -- A -- forward_compute_time=x, backward_compute_time=0, "
        "activation_size=0, parameter_size=0\n",
        "g.txt");
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("g.txt:1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_graph_txt("node1 -- A -- forward_compute_time=1, backward_compute_time=0, "
                              "activation_size=0, parameter_size=0\n\tnode1 -- node9\n"),
               PlanError);
  EXPECT_THROW(read_graph_txt("node1 -- A -- forward_compute_time=1, backward_compute_time=0, "
                              "activation_size=0, parameter_size=0\n"
                              "node2 -- B -- forward_compute_time=1, backward_compute_time=0, "
                              "activation_size=0, parameter_size=0\n"
                              "\tnode1 -- node2\n\tnode2 -- node1\n"),
               PlanError);
}

// A residual block: x -> Conv -> h; h -> Relu -> r; (h, r) -> Add -> y.
// Layers: conv | relu | add. The skip h is live across the cut after relu.
ir::Graph residual() {
  using namespace ir;
  Graph g;
  g.name = "res";
  g.set_tensor({"x", DType::kF32, {2, 3, 8, 8}, Role::kInput});
  g.inputs = {"x"};
  g.set_value("W", Tensor(DType::kF32, {3, 3, 3, 3}), Role::kParam);
  Node conv{"/c/Conv", "Conv", {"x", "W"}, {"h"}, {}};
  conv.attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  conv.attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
  g.nodes.push_back(conv);
  g.nodes.push_back({"/r/Relu", "Relu", {"h"}, {"r"}, {}});
  g.nodes.push_back({"/a/Add", "Add", {"h", "r"}, {"y"}, {}});
  g.outputs = {"y"};
  g.infer_shapes();
  g.set_layers({{"conv", {0}}, {"relu", {1}}, {"add", {2}}});
  return g;
}

TEST(ProfileIr, SkipConnectionsCountInCutBytes) {
  ir::Graph g = residual();
  const int64_t act = 2 * 3 * 8 * 8 * 4;  // one (2, 3, 8, 8) f32 tensor
  auto cut = cut_bytes_per_layer(g);
  ASSERT_EQ(cut.size(), 3u);
  EXPECT_EQ(cut[0], act);      // h
  EXPECT_EQ(cut[1], 2 * act);  // h (skip) and r
  EXPECT_EQ(cut[2], 0);
  Profile p = structural_profile(g);
  EXPECT_EQ(p.layers[0].param_bytes, 3 * 3 * 3 * 3 * 4);
  EXPECT_EQ(p.layers[0].output_bytes, act);
  EXPECT_EQ(p.layers[0].nodes, std::vector<std::string>{"/c/Conv"});
  EXPECT_EQ(p.edges, (std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {1, 2}}));
  EXPECT_EQ(p.batch, 2);
}

TEST(ProfileIr, ParamsReadBySeveralLayersAreTied) {
  // The conv weight read again by a second conv in the last layer: GPT's
  // token embedding and LM head, in miniature.
  ir::Graph g = residual();
  ir::Node again{"/d/Conv", "Conv", {"y", "W"}, {"z"}, {}};
  again.attrs["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  again.attrs["kernel_shape"] = std::vector<int64_t>{3, 3};
  g.nodes.push_back(again);
  g.outputs = {"z"};
  g.infer_shapes();
  g.set_layers({{"conv", {0}}, {"relu", {1}}, {"add", {2}}, {"conv2", {3}}});
  Profile p = structural_profile(g);
  ASSERT_EQ(p.tied.size(), 1u);
  EXPECT_EQ(p.tied[0].name, "W");
  EXPECT_EQ(p.tied[0].bytes, 3 * 3 * 3 * 3 * 4);
  EXPECT_EQ(p.tied[0].layers, (std::vector<int>{0, 3}));
  // JSON keeps it; a tie naming one layer is refused.
  Profile q = profile_from_json(to_json(p));
  EXPECT_EQ(q.tied[0].layers, p.tied[0].layers);
  auto j = to_json(p);
  j["tied"][0]["layers"] = {3};
  EXPECT_THROW(profile_from_json(j), PlanError);
}

TEST(ProfileIr, LayersOutOfOrderAreAModelError) {
  ir::Graph g = residual();
  g.set_layers({{"relu", {1}}, {"conv", {0}}, {"add", {2}}});
  EXPECT_THROW(cut_bytes_per_layer(g), ModelError);
}

TEST(ProfileIr, AnalyticIsARooflinePerNode) {
  ir::Graph g = residual();
  DeviceSpec d{"toy", 1e9, 0, 1e6, 0, 1e-6};
  Profile p = analytic_profile(g, d);
  // Conv: 2 * 384 outputs * 27 taps = 20736 FLOPs -> 20.736 us; bytes: x 1536
  // + W 324 + h 1536 = 3396 -> 3396 us at 1 MB/s. Memory bound, plus 1 us.
  EXPECT_NEAR(p.layers[0].forward_s, 1e-6 + 3396e-6, 1e-12);
  // Relu: 384 FLOPs; 3072 bytes. Add: 384 FLOPs; 4608 bytes.
  EXPECT_NEAR(p.layers[1].forward_s, 1e-6 + 3072e-6, 1e-12);
  EXPECT_NEAR(p.layers[2].forward_s, 1e-6 + 4608e-6, 1e-12);
  EXPECT_TRUE(p.backward_estimated);
  EXPECT_DOUBLE_EQ(p.layers[2].backward_s, 2 * p.layers[2].forward_s);
  EXPECT_EQ(p.source, "analytic");
}

TEST(ProfileIr, MeasuredTakesTheMedianAfterWarmUp) {
  ir::Graph g = residual();
  g.nodes[2].backward = true;  // pretend Add is a gradient node of layer "add"
  int call = 0;
  // Run k reports node i as (i + 1) * t_k: warm-up 100, then 3, 1, 2.
  std::vector<double> t = {100, 3, 1, 2};
  Profile p = measured_profile(
      g,
      [&](std::vector<double>& s) {
        for (size_t i = 0; i < s.size(); ++i) s[i] = double(i + 1) * t[call];
        ++call;
      },
      1, 3, "cpu");
  EXPECT_EQ(call, 4);
  EXPECT_DOUBLE_EQ(p.layers[0].forward_s, 2.0);
  EXPECT_DOUBLE_EQ(p.layers[1].forward_s, 4.0);
  EXPECT_DOUBLE_EQ(p.layers[2].forward_s, 0.0);
  EXPECT_DOUBLE_EQ(p.layers[2].backward_s, 6.0);
  EXPECT_FALSE(p.backward_estimated);
}

}  // namespace
}  // namespace pipetrain::partitioner
