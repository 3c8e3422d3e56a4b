// What the fusion pass tests share: a graph's op sequence, and outputs,
// losses and gradients of an unfused and a fused graph side by side on the
// CPU and the portable backend. The graphs read input "x" and write "y".
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "autodiff/autodiff.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "ir/error.h"
#include "ir/passes/fusion.h"
#include "tests/autodiff/grad_check.h"

namespace pipetrain::test {

using ir::Attribute;

inline std::vector<std::string> op_sequence(const ir::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

// g's shape inference refuses it with a ModelError whose message names `fragment`.
inline void expect_refused(ir::Graph& g, const std::string& fragment) {
  try {
    g.infer_shapes();
    ADD_FAILURE() << "accepted; expected an error naming '" << fragment << "'";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// split_fused_epilogues(fused) gives standard nodes (no activation, no
// residual slot), the ops of `plain`, and fusing that again gives `fused`'s
// nodes, names included (what an export and a re-import do; `inference`:
// `fused` came from fuse(g, true)).
inline void expect_split_inverts_fuse(const ir::Graph& plain, const ir::Graph& fused, int splits,
                                      bool inference = false) {
  ir::Graph split = fused;
  EXPECT_EQ(ir::passes::split_fused_epilogues(split), splits);
  split.infer_shapes();
  split.verify();
  std::vector<std::string> ops = op_sequence(split), plain_ops = op_sequence(plain);
  std::sort(ops.begin(), ops.end());
  std::sort(plain_ops.begin(), plain_ops.end());
  EXPECT_EQ(ops, plain_ops);
  for (const auto& n : split.nodes) {
    EXPECT_FALSE(n.has_attr("activation")) << n.name;
    EXPECT_LE(n.inputs.size(), n.op_type == "Conv" ? 3u : 5u) << n.name;
  }
  ir::passes::fuse(split, inference);
  split.infer_shapes();
  ASSERT_EQ(split.nodes.size(), fused.nodes.size());
  for (size_t i = 0; i < split.nodes.size(); ++i) {
    const ir::Node &a = split.nodes[i], &b = fused.nodes[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.op_type, b.op_type) << b.name;
    EXPECT_EQ(a.inputs, b.inputs) << b.name;
    EXPECT_EQ(a.outputs, b.outputs) << b.name;
    EXPECT_EQ(a.attrs.size(), b.attrs.size()) << b.name;
    EXPECT_EQ(a.attr_string("activation", ""), b.attr_string("activation", "")) << b.name;
  }
}

// Output y of `plain` and of `fused` for one random x (of the graph's shape)
// on the CPU and on the portable backend: check(got, want) for each.
template <typename Check>
inline void compare_outputs(const ir::Graph& plain, const ir::Graph& fused, uint64_t seed,
                            Check check) {
  std::mt19937_64 rng(seed);
  const std::map<std::string, ir::Tensor> feeds = {
      {"x", random_tensor(plain.tensor("x").shape, test::Gen::kUniform, rng)}};
  for (auto make :
       {+[] { return exec::make_cpu_backend(); }, +[] { return exec::make_portable_backend(); }}) {
    auto backend = make();
    SCOPED_TRACE(backend->name());
    check(exec::ForwardRunner(fused, *backend).run(feeds, {}).at("y"),
          exec::ForwardRunner(plain, *backend).run(feeds, {}).at("y"));
  }
}

// g with the loss mean(y * y) (a gradient that varies per element), and its
// backward: the loss and d loss / d p for every parameter p, keyed "loss"
// and "d p", for one random x on `backend`.
inline std::map<std::string, ir::Tensor> loss_and_grads(ir::Graph g, exec::Backend& backend,
                                                        uint64_t seed) {
  g.nodes.push_back({"/sq", "Mul", {"y", "y"}, {"y2"}, {}});
  g.nodes.push_back(
      {"/loss", "ReduceMean", {"y2"}, {"loss"}, {{"keepdims", Attribute(int64_t{0})}}});
  g.outputs = {"loss"};
  g.infer_shapes();
  const auto grads = autodiff::build_backward(g, "loss").grads;
  std::mt19937_64 rng(seed);
  const std::map<std::string, ir::Tensor> feeds = {
      {"x", random_tensor(g.tensor("x").shape, test::Gen::kUniform, rng)}};
  exec::RunOptions o;
  o.training = true;
  auto out = exec::ForwardRunner(g, backend).run(feeds, o);
  std::map<std::string, ir::Tensor> r = {{"loss", out.at("loss")}};
  for (const auto& [param, grad] : grads) r.emplace("d " + param, out.at(grad));
  return r;
}

// The loss and every parameter's gradient of `plain` and of `fused` (the
// same parameters) on the CPU and the portable backend: check(what, got,
// want) for each.
template <typename Check>
inline void compare_training(const ir::Graph& plain, const ir::Graph& fused, uint64_t seed,
                             Check check) {
  for (auto make :
       {+[] { return exec::make_cpu_backend(); }, +[] { return exec::make_portable_backend(); }}) {
    auto backend = make();
    SCOPED_TRACE(backend->name());
    const auto want = loss_and_grads(plain, *backend, seed);
    const auto got = loss_and_grads(fused, *backend, seed);
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [what, w] : want) check(what, got.at(what), w);
  }
}

}  // namespace pipetrain::test
