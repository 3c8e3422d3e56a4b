// What the fusion pass tests share: a graph's op sequence, and outputs,
// losses and gradients of an unfused and a fused graph side by side on the
// CPU and the portable backend. The graphs read input "x" and write "y".
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "autodiff/autodiff.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "tests/autodiff/grad_check.h"

namespace pipetrain::test {

using ir::Attribute;

inline std::vector<std::string> op_sequence(const ir::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op_type);
  return ops;
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
