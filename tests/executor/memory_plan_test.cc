// The liveness memory plan of a training step: no two tensors alive at the
// same time share bytes, the arena reaches the live-bytes lower bound within
// a margin, and a planned run gives bitwise the outputs of an unplanned one.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "autodiff/autodiff.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "executor/memory_plan.h"
#include "tests/autodiff/grad_check.h"
#include "tests/executor/test_models.h"

namespace pipetrain {
namespace {

TEST(MemoryPlan, LiveTensorsNeverShareBytes) {
  ir::Graph g = testing_models::reshape_mlp().graph;
  auto backend = exec::make_cpu_backend();
  exec::MemoryPlan plan =
      exec::plan_memory(g, [&](const ir::Node& n) { return backend->output_is_view(n); });
  std::vector<std::pair<std::string, exec::TensorSlot>> roots;
  for (const auto& [name, s] : plan.slots)
    if (s.root == name && s.bytes > 0) roots.emplace_back(name, s);
  for (size_t i = 0; i < roots.size(); ++i)
    for (size_t j = i + 1; j < roots.size(); ++j) {
      const auto& a = roots[i].second;
      const auto& b = roots[j].second;
      const bool lives_overlap = a.first <= b.last && b.first <= a.last;
      const bool bytes_overlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      EXPECT_FALSE(lives_overlap && bytes_overlap) << roots[i].first << " and " << roots[j].first;
    }
  EXPECT_GE(plan.arena_bytes, plan.peak_live_bytes);
  EXPECT_LE(plan.arena_bytes, plan.peak_live_bytes * 3 / 2) << "placement wastes over 50%";
  EXPECT_LT(plan.arena_bytes, plan.naive_bytes) << "no buffer was reused";
  // The reshape of input x is a view: it takes no arena space.
  EXPECT_EQ(plan.slots.at("xf").bytes, 0u);
}

TEST(MemoryPlan, PlannedRunMatchesUnplannedBitwise) {
  ir::Graph g = testing_models::reshape_mlp().graph;
  std::mt19937_64 rng(5);
  ir::Tensor x = test::random_tensor({8, 2, 8}, test::Gen::kUniform, rng);
  ir::Tensor y = ir::Tensor::from_i64({0, 1, 2, 3, 4, 5, 6, 9}, {8});
  auto backend = exec::make_cpu_backend();
  auto plain = exec::ForwardRunner(g, *backend).run({{"x", x}, {"y", y}});
  exec::ForwardRunner planned(g, *backend, /*plan_memory=*/true);
  for (int rep = 0; rep < 2; ++rep) {  // the second run reuses a dirty arena
    auto outs = planned.run({{"x", x}, {"y", y}});
    for (const auto& [name, t] : plain) {
      const ir::Tensor& p = outs.at(name);
      ASSERT_EQ(p.nbytes(), t.nbytes()) << name;
      EXPECT_EQ(std::memcmp(p.raw(), t.raw(), t.nbytes()), 0)
          << name << " differs (run " << rep << ")";
    }
  }
}

// Held outputs (a pipeline stage's stash) come back in buffers of their own:
// the next run leaves them as they were, and the arena has no room for them.
TEST(MemoryPlan, HeldOutputsOutliveTheNextRunOutsideTheArena) {
  ir::Graph g = testing_models::reshape_mlp().graph;
  std::mt19937_64 rng(7);
  ir::Tensor x1 = test::random_tensor({8, 2, 8}, test::Gen::kUniform, rng);
  ir::Tensor x2 = test::random_tensor({8, 2, 8}, test::Gen::kUniform, rng);
  ir::Tensor y = ir::Tensor::from_i64({0, 1, 2, 3, 4, 5, 6, 9}, {8});
  auto backend = exec::make_cpu_backend();
  auto want = exec::ForwardRunner(g, *backend).run({{"x", x1}, {"y", y}});
  const std::set<std::string> held(g.outputs.begin(), g.outputs.end());
  exec::ForwardRunner all_in_arena(g, *backend, /*plan_memory=*/true);
  exec::ForwardRunner holding(g, *backend, /*plan_memory=*/true, {}, held);
  EXPECT_LT(holding.memory_plan()->arena_bytes, all_in_arena.memory_plan()->arena_bytes);
  auto first = holding.run({{"x", x1}, {"y", y}});
  auto second = holding.run({{"x", x2}, {"y", y}});
  for (const auto& [name, t] : want) {
    const ir::Tensor& kept = first.at(name);
    ASSERT_EQ(kept.nbytes(), t.nbytes()) << name;
    EXPECT_EQ(std::memcmp(kept.raw(), t.raw(), t.nbytes()), 0) << name << " changed by run 2";
    EXPECT_NE(kept.raw(), second.at(name).raw()) << name << " shares run 2's buffer";
  }
}

}  // namespace
}  // namespace pipetrain
