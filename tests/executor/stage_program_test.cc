// Stage programs: running the stages one after another on one thread (forward
// 0..p-1 passing only the listed transfers, then backward p-1..0) reproduces
// the whole training graph's loss and parameter gradients bit for bit; skip
// connections are one direct transfer; tied weights get a copy per stage.
#include "executor/stage_program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "autodiff/training_graph.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "executor/measured_profile.h"
#include "importer/importer.h"
#include "ir/error.h"
#include "models/zoo.h"
#include "partitioner/profile_ir.h"
#include "tests/executor/test_models.h"

namespace pipetrain {
namespace {

using testing_models::node;
using testing_models::skip_mlp;
using testing_models::wave;

using Layers = std::vector<std::pair<int, int>>;
using TensorMap = std::map<std::string, ir::Tensor>;

TensorMap feeds_for(const autodiff::TrainingGraph& tg) {
  TensorMap feeds;
  for (const auto& in : tg.graph.inputs) {
    const ir::TensorDesc& d = tg.graph.tensor(in);
    if (in == tg.labels) {
      std::vector<int64_t> labels(static_cast<size_t>(ir::numel(d.shape)));
      for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>((i * 7) % 3);
      feeds[in] = ir::Tensor::from_i64(labels, d.shape);
    } else {
      feeds[in] = wave(d.shape, 0.7);
    }
  }
  return feeds;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool has_transfer(const std::vector<exec::Transfer>& v, const std::string& t) {
  return std::any_of(v.begin(), v.end(), [&](const exec::Transfer& tr) { return tr.tensor == t; });
}

void expect_bitwise(const ir::Tensor& got, const ir::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0) << what << " differs";
}

// Runs the programs one after another: each stage sees only its data inputs,
// what was sent to it and its own stash. Returns the loss and the gradients.
// `split`: each backward as its input part, then (after the earlier stages'
// input parts) its weight part, reading only the carry in between.
TensorMap run_pipeline(const std::vector<exec::StageProgram>& programs, const TensorMap& data,
                       exec::Backend& backend, bool split = false) {
  const size_t p = programs.size();
  std::vector<TensorMap> inbox(p), stash(p), carry(p);
  TensorMap results;
  auto gather = [&](const ir::Graph& g, size_t s, bool backward) {
    TensorMap feeds;
    for (const auto& in : g.inputs) {
      const auto& prog = programs[s];
      if (contains(prog.inputs, in)) {
        feeds[in] = data.at(in);
      } else if (backward && carry[s].count(in)) {
        feeds[in] = carry[s].at(in);
      } else if (backward && contains(prog.stash, in)) {
        EXPECT_TRUE(stash[s].count(in)) << "stage " << s << " did not keep stash '" << in << "'";
        feeds[in] = stash[s].at(in);
      } else {
        EXPECT_TRUE(has_transfer(backward ? prog.recv_bwd : prog.recv_fwd, in))
            << "stage " << s << " reads '" << in << "' from nowhere";
        feeds[in] = inbox[s].at(in);
      }
    }
    return feeds;
  };
  auto deliver = [&](const std::vector<exec::Transfer>& sends, const TensorMap& outs) {
    for (const auto& tr : sends)
      inbox[static_cast<size_t>(tr.to_stage)][tr.tensor] = outs.at(tr.tensor);
  };
  for (size_t s = 0; s < p; ++s) {
    const auto& prog = programs[s];
    TensorMap outs = exec::ForwardRunner(prog.forward, backend).run(gather(prog.forward, s, false));
    deliver(prog.send_fwd, outs);
    // The stash: own forward outputs, and forward-phase tensors received.
    for (const auto& t : prog.stash) stash[s][t] = outs.count(t) ? outs.at(t) : inbox[s].at(t);
    for (const auto& r : prog.results) results[r] = outs.at(r);
  }
  for (size_t s = p; s-- > 0;) {
    const auto& prog = programs[s];
    if (split) {
      TensorMap outs = exec::ForwardRunner(prog.backward_input, backend)
                           .run(gather(prog.backward_input, s, true));
      deliver(prog.send_bwd, outs);
      for (const auto& c : prog.carry) carry[s][c] = outs.at(c);
      continue;
    }
    TensorMap outs =
        exec::ForwardRunner(prog.backward, backend).run(gather(prog.backward, s, true));
    deliver(prog.send_bwd, outs);
    for (const auto& [param, grad] : prog.grads) results[grad] = outs.at(grad);
  }
  for (size_t s = 0; split && s < p; ++s) {
    const auto& prog = programs[s];
    TensorMap outs = exec::ForwardRunner(prog.backward_weight, backend)
                         .run(gather(prog.backward_weight, s, true));
    for (const auto& [param, grad] : prog.grads)
      results[grad] = outs.count(grad) ? outs.at(grad) : carry[s].at(grad);
  }
  return results;
}

// Whole graph vs stage programs, for each cut of the layers into stages.
void check_equivalence(const autodiff::TrainingGraph& tg, const std::vector<Layers>& cuts) {
  auto backend = exec::make_cpu_backend();
  const TensorMap data = feeds_for(tg);
  const TensorMap want = exec::ForwardRunner(tg.graph, *backend).run(data);
  for (const Layers& cut : cuts) {
    SCOPED_TRACE("stages: " + std::to_string(cut.size()));
    auto programs = exec::build_stage_programs(tg, cut);
    ASSERT_EQ(programs.size(), cut.size());
    // Every param with a gradient is owned by exactly one stage.
    std::map<std::string, int> owners;
    for (const auto& prog : programs)
      for (const auto& param : prog.params) EXPECT_TRUE(owners.emplace(param, prog.stage).second);
    for (const auto& [param, grad] : tg.grads) {
      ASSERT_TRUE(owners.count(param)) << param;
      EXPECT_EQ(programs[static_cast<size_t>(owners[param])].grads.at(param), grad);
    }
    // A chain: every cut carries activations forward and gradients back.
    for (size_t s = 0; s + 1 < programs.size(); ++s) {
      EXPECT_FALSE(programs[s].send_fwd.empty()) << "stage " << s;
      EXPECT_FALSE(programs[s + 1].send_bwd.empty()) << "stage " << s + 1;
    }
    EXPECT_TRUE(contains(programs.back().results, tg.loss));
    EXPECT_TRUE(contains(programs.back().inputs, tg.labels));
    TensorMap got = run_pipeline(programs, data, *backend);
    expect_bitwise(got.at(tg.loss), want.at(tg.loss), "loss");
    for (const auto& [param, grad] : tg.grads) expect_bitwise(got.at(grad), want.at(grad), grad);

    // Zero-bubble split: the same bits, and nothing computed twice.
    for (auto& prog : programs) {
      exec::split_backward(prog);
      std::set<std::string> made;
      size_t copies = 0;
      for (const ir::Graph* part : {&prog.backward_input, &prog.backward_weight})
        for (const auto& n : part->nodes) {
          copies += n.name.size() > 7 && n.name.compare(n.name.size() - 7, 7, "/weight") == 0;
          for (const auto& t : n.outputs)
            if (!t.empty()) {
              EXPECT_TRUE(made.insert(t).second) << "'" << t << "' computed twice";
            }
        }
      EXPECT_EQ(prog.backward_input.nodes.size() + prog.backward_weight.nodes.size(),
                prog.backward.nodes.size() + copies)
          << "stage " << prog.stage;
      // A gradient sent upstream is carried to W only when W reads it.
      for (const auto& tr : prog.send_bwd)
        if (!contains(prog.backward_weight.inputs, tr.tensor)) {
          EXPECT_FALSE(contains(prog.carry, tr.tensor)) << tr.tensor << " carried for nothing";
        }
      for (const auto& n : prog.backward_input.nodes)  // no weight gradient waits for W
        for (const auto& [param, grad] : prog.grads)
          if (!prog.send_bwd.empty() && n.op_type == "Gemm") {
            EXPECT_FALSE(contains(n.outputs, grad)) << n.name << " in the input part";
          }
    }
    got = run_pipeline(programs, data, *backend, /*split=*/true);
    for (const auto& [param, grad] : tg.grads)
      expect_bitwise(got.at(grad), want.at(grad), grad + " (split backward)");
  }
}

TEST(StagePrograms, SkipMlpMatchesWholeGraphBitwise) {
  auto tg = autodiff::build_training_graph(skip_mlp(), {"cross-entropy", ""});
  check_equivalence(tg, {{{0, 2}}, {{0, 0}, {1, 2}}, {{0, 1}, {2, 2}}, {{0, 0}, {1, 1}, {2, 2}}});
}

TEST(StagePrograms, SkipConnectionIsOneDirectTransfer) {
  auto tg = autodiff::build_training_graph(skip_mlp(), {"cross-entropy", ""});
  auto programs = exec::build_stage_programs(tg, {{0, 0}, {1, 1}, {2, 2}});
  const auto& s0 = programs[0];
  const auto& s1 = programs[1];
  const auto& s2 = programs[2];
  // h1: 0 -> 1 (gemm1) and 0 -> 2 (add, mul) directly; stage 1 relays nothing.
  EXPECT_EQ(s2.recv_fwd, (std::vector<exec::Transfer>{{"h2", 1, 2}, {"h1", 0, 2}}));
  EXPECT_EQ(s0.send_fwd, (std::vector<exec::Transfer>{{"h1", 0, 1}, {"h1", 0, 2}}));
  EXPECT_EQ(s1.send_fwd, (std::vector<exec::Transfer>{{"h2", 1, 2}}));
  // Stage 2's backward reads the received h1 (Mul's input): stashed, with its own s and m.
  EXPECT_TRUE(contains(s2.stash, "h1") && contains(s2.stash, "s") && contains(s2.stash, "m"));
  EXPECT_FALSE(contains(s2.stash, "h2"));
  // Own activations Relu's backward reads stay local: stashed, not transferred.
  // Relu's backward reads its output: stage 0 keeps its own h1, stage 1 its h2
  // and the h1 it received (Gemm's dW = h1^T dY); none of these is sent back.
  EXPECT_EQ(s0.stash, (std::vector<std::string>{"h1"}));
  EXPECT_EQ(s1.stash, (std::vector<std::string>{"h2", "h1"}));
  EXPECT_TRUE(s0.recv_fwd.empty());
  // Gradients: stage 2 sends its two parts of dh1 (from Add and from Mul;
  // autodiff sums them in h1's layer) straight to stage 0, and dh2 to stage 1.
  std::set<std::string> from2;
  int from1 = 0;
  for (const auto& tr : s0.recv_bwd) {
    EXPECT_EQ(tr.to_stage, 0);
    if (tr.from_stage == 2) from2.insert(tr.tensor);
    from1 += tr.from_stage == 1;
  }
  EXPECT_EQ(from2.size(), 2u);
  EXPECT_EQ(from1, 1);
  ASSERT_EQ(s1.recv_bwd.size(), 1u);
  EXPECT_EQ(s1.recv_bwd[0].from_stage, 2);
  EXPECT_TRUE(s2.recv_bwd.empty());
  EXPECT_EQ(s2.send_bwd.size(), 3u);
  EXPECT_TRUE(s1.send_bwd.size() == 1u && s1.send_bwd[0].to_stage == 0);
  EXPECT_EQ(s0.params, (std::vector<std::string>{"b0", "w0"}));
  EXPECT_EQ(s0.inputs, (std::vector<std::string>{"x"}));
  EXPECT_EQ(s1.inputs, (std::vector<std::string>{}));
  EXPECT_EQ(s2.inputs, (std::vector<std::string>{"labels", "loss/weight"}));
}

// The zoo's LeNet at batch 2, one node per layer, with its loss and backward.
autodiff::TrainingGraph lenet_training_graph() {
  models::ZooOptions opts;
  opts.batch = 2;
  opts.seed = 3;
  onnx::ModelProto proto = models::build_zoo_model("lenet", opts);
  importer::ImportOptions io;  // one node per layer
  ir::Graph model = importer::import_model_bytes(proto.SerializeAsString(), ".", io);
  return autodiff::build_training_graph(model, {"cross-entropy", ""});
}

TEST(StagePrograms, LenetMatchesWholeGraphBitwise) {
  auto tg = lenet_training_graph();
  const int n = static_cast<int>(tg.graph.layers.size());
  ASSERT_GE(n, 3);
  check_equivalence(tg, {{{0, n - 1}},
                         {{0, n / 2 - 1}, {n / 2, n - 1}},
                         {{0, n / 3 - 1}, {n / 3, 2 * n / 3 - 1}, {2 * n / 3, n - 1}}});
  // A convolution's gradient node splits: the input gradient stays in the
  // input part, the weight and bias gradients move to the weight part.
  int second_conv = -1, convs = 0;  // stage 1 starts at LeNet's second convolution
  for (const auto& node : tg.graph.nodes)
    if (node.op_type == "Conv" && ++convs == 2) second_conv = node.layer;
  ASSERT_GT(second_conv, 0);
  auto programs = exec::build_stage_programs(tg, {{0, second_conv - 1}, {second_conv, n - 1}});
  exec::split_backward(programs[1]);
  int conv_weight_parts = 0;
  for (const auto& node : programs[1].backward_weight.nodes)
    conv_weight_parts += node.op_type == "ConvGrad" && node.outputs[0].empty();
  int conv_in_backward = 0;
  for (const auto& node : programs[1].backward.nodes)
    conv_in_backward += node.op_type == "ConvGrad";
  EXPECT_GT(conv_in_backward, 0);
  EXPECT_EQ(conv_weight_parts, conv_in_backward);
}

// The profile's input-gradient share (what the simulator charges a
// zero-bubble B op) is what split_backward puts in the input part, for every
// cut of LeNet: with each node timed 1 s, a stage's B costs its input part's
// node count, a split convolution gradient counting half. Its carry bytes
// are what the stage keeps from B to W: the carried tensors and the received
// gradients W reads (the first stage: only those).
TEST(StagePrograms, ProfileInputGradientShareIsTheZeroBubbleInputPart) {
  auto tg = lenet_training_graph();
  const int n = static_cast<int>(tg.graph.layers.size());
  const partitioner::Profile p = partitioner::measured_profile(
      tg.graph, [](std::vector<double>& s) { std::fill(s.begin(), s.end(), 1.0); }, 0, 1, "cpu");
  for (int cut = 1; cut < n; ++cut) {
    SCOPED_TRACE("stage 1 from layer " + std::to_string(cut));
    auto programs = exec::build_stage_programs(tg, {{0, cut - 1}, {cut, n - 1}});
    exec::split_backward(programs[1]);
    double want = 0;
    for (const auto& node : programs[1].backward_input.nodes) {
      const bool split_conv =
          node.op_type == "ConvGrad" &&
          std::any_of(programs[1].backward_weight.nodes.begin(),
                      programs[1].backward_weight.nodes.end(),
                      [&](const ir::Node& w) { return w.name == node.name + "/weight"; });
      want += split_conv ? 0.5 : 1.0;
    }
    double got = 0, backward = 0;
    for (int l = cut; l < n; ++l) {
      got += p.layers[static_cast<size_t>(l)].backward_input_s;
      backward += p.layers[static_cast<size_t>(l)].backward_s;
    }
    EXPECT_DOUBLE_EQ(got, want);
    EXPECT_LT(got, backward);  // the weight gradients are left for W
    auto kept = [](const exec::StageProgram& prog) {
      int64_t bytes = 0;
      for (const auto& t : prog.carry)
        bytes += static_cast<int64_t>(prog.backward_input.tensor(t).nbytes());
      for (const auto& tr : prog.recv_bwd)
        if (contains(prog.backward_weight.inputs, tr.tensor))
          bytes += static_cast<int64_t>(prog.backward_weight.tensor(tr.tensor).nbytes());
      return bytes;
    };
    int64_t carried = 0;
    for (int l = cut; l < n; ++l) carried += p.layers[static_cast<size_t>(l)].carry_bytes;
    EXPECT_EQ(carried, kept(programs[1]));
    exec::split_backward(programs[0]);
    EXPECT_TRUE(programs[0].backward_input.nodes.empty());
    EXPECT_EQ(p.layers[static_cast<size_t>(cut - 1)].cut_bytes, kept(programs[0]));
  }
}

// What the profile says a split stage keeps from B to W (the simulator's
// weight stash) is, for every stage of LeNet not the first, the stash
// tensors its weight half reads: a tensor that only a later stage's dW
// reads (a Relu stage's output) counts there, not in the stage that made it.
TEST(StagePrograms, ProfileWeightStashIsWhatTheWeightHalfReads) {
  auto tg = lenet_training_graph();
  const int n = static_cast<int>(tg.graph.layers.size());
  const partitioner::Profile p = partitioner::measured_profile(
      tg.graph, [](std::vector<double>& s) { std::fill(s.begin(), s.end(), 1.0); }, 0, 1, "cpu");
  ASSERT_TRUE(p.weight_reads_known);
  int weightless = 0;  // stages without params whose stash W reads nothing
  for (int a = 1; a < n; ++a)
    for (int b = a; b < n; ++b) {
      SCOPED_TRACE("stage over layers " + std::to_string(a) + ".." + std::to_string(b));
      std::vector<std::pair<int, int>> ranges = {{0, a - 1}, {a, b}};
      if (b + 1 < n) ranges.push_back({b + 1, n - 1});
      auto programs = exec::build_stage_programs(tg, ranges);
      exec::StageProgram& prog = programs[1];
      exec::split_backward(prog);
      int64_t want = 0;
      for (const auto& t : prog.stash)
        if (contains(prog.backward_weight.inputs, t))
          want += static_cast<int64_t>(tg.graph.tensor(t).nbytes());
      EXPECT_EQ(p.weight_stash_bytes(a, b), want);
      if (want == 0 && !prog.stash.empty()) ++weightless;
    }
  EXPECT_GT(weightless, 0);  // the case the per-layer count got wrong
}

// calibrate_to_stages: each stage's layer times sum to its own program's
// (here LeNet's real milliseconds, where the synthetic profile gave every
// node 1 s), shared among its layers as before; bytes stay as they were.
TEST(StagePrograms, CalibrationRescalesEachStageKeepingItsLayerShares) {
  auto tg = lenet_training_graph();
  const int n = static_cast<int>(tg.graph.layers.size());
  const partitioner::Profile before = partitioner::measured_profile(
      tg.graph, [](std::vector<double>& s) { std::fill(s.begin(), s.end(), 1.0); }, 0, 1, "cpu");
  std::map<std::string, ir::Tensor> feeds;
  for (const auto& name : tg.graph.inputs) {
    const ir::TensorDesc& d = tg.graph.tensor(name);
    ir::Tensor t(d.dtype, d.shape);  // labels: class 0
    if (d.dtype == ir::DType::kF32)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::sin(0.1f * i);
    feeds[name] = t;
  }
  const std::vector<std::pair<int, int>> ranges = {{0, n / 2 - 1}, {n / 2, n - 1}};
  exec::OptimizerConfig sgd;
  const partitioner::Profile after =
      exec::calibrate_to_stages(before, tg, ranges, feeds, sgd, 1, 3);
  ASSERT_EQ(after.layers.size(), before.layers.size());
  for (const auto& [first, last] : ranges) {
    SCOPED_TRACE("stage of layers " + std::to_string(first) + "-" + std::to_string(last));
    double f_before = 0, f_after = 0, b_before = 0, b_after = 0, update = 0;
    for (int l = first; l <= last; ++l) {
      const auto& x = before.layers[static_cast<size_t>(l)];
      const auto& y = after.layers[static_cast<size_t>(l)];
      f_before += x.forward_s, f_after += y.forward_s;
      b_before += x.backward_s, b_after += y.backward_s;
      update += y.update_s;
      EXPECT_EQ(y.output_bytes, x.output_bytes);
      EXPECT_EQ(y.cut_bytes, x.cut_bytes);
      EXPECT_EQ(y.param_bytes, x.param_bytes);
    }
    EXPECT_GT(f_after, 0.0);
    EXPECT_LT(f_after, 0.5) << "still the synthetic seconds";
    EXPECT_GT(b_after, 0.0);
    EXPECT_LT(b_after, 0.5);
    EXPECT_GT(update, 0.0);  // both halves hold params
    for (int l = first; l <= last; ++l) {
      const auto& x = before.layers[static_cast<size_t>(l)];
      const auto& y = after.layers[static_cast<size_t>(l)];
      EXPECT_NEAR(y.forward_s / f_after, x.forward_s / f_before, 1e-12) << "layer " << l;
      EXPECT_NEAR(y.backward_s / b_after, x.backward_s / b_before, 1e-12) << "layer " << l;
      if (x.backward_input_s > 0) {
        EXPECT_NEAR(y.backward_input_s / y.backward_s, x.backward_input_s / x.backward_s, 1e-12);
      }
    }
  }
  // Timed as B and W (ZB's and the V's split backward): the input part is the measured
  // share of the stage's backward, strictly inside it (the stage's first layer reads
  // the data, and the weight part of its Gemms is real work).
  const partitioner::Profile split =
      exec::calibrate_to_stages(before, tg, ranges, feeds, sgd, 1, 3, 0, {}, true);
  for (const auto& [first, last] : ranges) {
    SCOPED_TRACE("split stage of layers " + std::to_string(first) + "-" + std::to_string(last));
    double b = 0, bi = 0;
    for (int l = first; l <= last; ++l) {
      b += split.layers[static_cast<size_t>(l)].backward_s;
      bi += split.layers[static_cast<size_t>(l)].backward_input_s;
    }
    EXPECT_GT(bi, 0.0);
    EXPECT_LT(bi, b);
    EXPECT_LT(b, 0.5) << "still the synthetic seconds";
  }
}

// A param read by two stages (tied weights): each stage keeps a copy, its
// backward sums its own contributions, and the partial gradients add up to
// the whole graph's gradient (two parts: a + b = b + a, so bitwise).
TEST(StagePrograms, TiedWeightsSplitTheirGradientPerStage) {
  ir::Graph g;
  g.name = "tied";
  g.set_tensor({"x", ir::DType::kF32, {2, 4}, ir::Role::kInput});
  g.inputs = {"x"};
  g.set_value("w_tied", wave({4, 4}, 0.1, 0.5), ir::Role::kParam);
  g.set_value("w_mid", wave({4, 4}, 0.3, 0.2), ir::Role::kParam);
  g.nodes = {node("g0", "Gemm", {"x", "w_tied"}, {"h"}), node("g1", "Gemm", {"h", "w_mid"}, {"m"}),
             node("g2", "Gemm", {"m", "w_tied"}, {"y"})};
  g.outputs = {"y"};
  g.set_layers({{"a", {0}}, {"b", {1}}, {"c", {2}}});
  g.infer_shapes();
  auto tg = autodiff::build_training_graph(g, {"cross-entropy", ""});
  auto backend = exec::make_cpu_backend();
  const TensorMap data = feeds_for(tg);
  const TensorMap want = exec::ForwardRunner(tg.graph, *backend).run(data);
  for (const Layers& cut : std::vector<Layers>{{{0, 0}, {1, 2}}, {{0, 0}, {1, 1}, {2, 2}}}) {
    SCOPED_TRACE("stages: " + std::to_string(cut.size()));
    auto programs = exec::build_stage_programs(tg, cut);
    const auto& first = programs.front();
    const auto& last = programs.back();
    const std::vector<int> sharing = {0, static_cast<int>(cut.size()) - 1};
    EXPECT_EQ(first.shared.at("w_tied"), sharing);
    EXPECT_EQ(last.shared.at("w_tied"), sharing);
    EXPECT_TRUE(contains(first.params, "w_tied"));
    EXPECT_TRUE(contains(last.params, "w_tied"));
    EXPECT_FALSE(first.shared.count("w_mid"));
    TensorMap got = run_pipeline(programs, data, *backend);
    expect_bitwise(got.at(tg.loss), want.at(tg.loss), "loss");
    expect_bitwise(got.at(tg.grads.at("w_mid")), want.at(tg.grads.at("w_mid")), "w_mid grad");
    const ir::Tensor& a = got.at(first.grads.at("w_tied"));
    const ir::Tensor& b = got.at(last.grads.at("w_tied"));
    EXPECT_NE(first.grads.at("w_tied"), last.grads.at("w_tied"));
    ir::Tensor sum = a.clone();
    for (int64_t i = 0; i < sum.numel(); ++i) sum.data<float>()[i] += b.data<float>()[i];
    expect_bitwise(sum, want.at(tg.grads.at("w_tied")), "summed partial gradients of w_tied");
  }
  EXPECT_NO_THROW(exec::build_stage_programs(tg, {{0, 2}}));  // one stage: nothing shared
  EXPECT_TRUE(exec::build_stage_programs(tg, {{0, 2}})[0].shared.empty());
}

TEST(StagePrograms, RefusesBadLayerRanges) {
  auto tg = autodiff::build_training_graph(skip_mlp(), {"cross-entropy", ""});
  EXPECT_THROW(exec::build_stage_programs(tg, {}), PlanError);
  EXPECT_THROW(exec::build_stage_programs(tg, {{0, 0}, {2, 2}}), PlanError);  // gap
  EXPECT_THROW(exec::build_stage_programs(tg, {{0, 1}}), PlanError);          // short
  EXPECT_THROW(exec::build_stage_programs(tg, {{0, 3}}), PlanError);          // past the end
}

}  // namespace
}  // namespace pipetrain
