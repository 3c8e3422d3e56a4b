// --cost-model pipedream against results worked out by hand from the
// reference optimizer's formulas (optimizer_graph_hierarchical.py), and the
// same inputs under the pipetrain model.
#include <gtest/gtest.h>

#include <random>

#include "ir/error.h"
#include "partitioner/dp.h"

namespace pipetrain::partitioner {
namespace {

Profile two_layers(double c0, double p0, double c1, double p1) {
  Profile p;
  p.layers = {{"a", c0, 0, 0, 0, static_cast<int64_t>(p0), {}, 0},
              {"b", c1, 0, 0, 0, static_cast<int64_t>(p1), {}, 0}};
  return p;
}

TEST(PipeDreamCompat, OneLevelByHand) {
  // C = [2, 2], P = [0, 2e9], 2 machines at 1e9 B/s.
  //   DP: (4 + 4*1*2e9/(1e9*2)) / 2 = 4.
  //   split after layer 0, one machine each: max(A[0][0][0] = 2, (2 + 0)/1) = 2.
  Topology t;
  t.levels = {{2, 1e9}};
  Plan plan = partition_pipedream(two_layers(2, 0, 2, 2e9), t);
  EXPECT_EQ(plan.config(), "straight");
  EXPECT_DOUBLE_EQ(plan.time_per_minibatch_s, 2.0);
  EXPECT_DOUBLE_EQ(plan.data_parallel_s, 4.0);
  EXPECT_DOUBLE_EQ(plan.single_worker_s, 4.0);
  EXPECT_EQ(plan.cost_model, "pipedream");
}

TEST(PipeDreamCompat, TwoLevelsByHand) {
  // C = [4, 4], P = [0, 4e9]; 2 servers at 1e9 B/s x 2 GPUs at 4e9 B/s.
  // Level 1 (GPUs, k = 1): A1(0..0, 2) = 4/2 = 2; A1(1..1, 2) = (4 + 4*4e9/(4e9*2))/2 = 3;
  //   A1(0..1, 2) = min((8 + 2)/2, max(A1(0..0, 1) = 4, 4)) = 4.
  // Level 2 (servers, k = 2 in the base case only):
  //   A2(0..1, 2) base = (4 + 4*4e9/(1e9*2)/2)/2 = 4;
  //   split: max(A2(0..0, 1) = 2, A1(1..1, 2) = 3 + 0) = 3 wins.
  // Walking down: layer 0 on server 0's two GPUs, layer 1 on server 1's.
  // Data parallel: (8 + 2)/2 = 5, then (5 + 4*4e9/(1e9*2)/2)/2 = 4.5.
  Topology t;
  t.levels = {{2, 1e9}, {2, 4e9}};
  Plan plan = partition_pipedream(two_layers(4, 0, 4, 4e9), t);
  ASSERT_EQ(plan.stages.size(), 2u);
  EXPECT_EQ(plan.config(), "2-2");
  EXPECT_EQ(plan.stages[0].workers, (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.stages[1].workers, (std::vector<int>{2, 3}));
  EXPECT_DOUBLE_EQ(plan.time_per_minibatch_s, 3.0);
  EXPECT_DOUBLE_EQ(plan.data_parallel_s, 4.5);
  EXPECT_EQ(plan.noam, 2);

  // pipetrain on the same inputs: the allreduce overlaps compute, so layer 1
  // on GPUs 2-3 takes max(4, 4*4e9/(4e9*2))/2 = 2 and data parallel
  // max(8, 4*3*4e9/(1e9*4))/4 = 3.
  Plan ours = partition(two_layers(4, 0, 4, 4e9), t);
  EXPECT_EQ(ours.config(), "2-2");
  EXPECT_DOUBLE_EQ(ours.time_per_minibatch_s, 2.0);
  EXPECT_DOUBLE_EQ(ours.data_parallel_s, 3.0);
}

TEST(PipeDreamCompat, TransfersCountOnlyWithACompressionRatio) {
  // C = [1, 1], P = [1e9, 0], 1e9 bytes cross the cut; 2 machines at 1e9 B/s.
  //   data parallel: (2 + 4*1*1e9/(1e9*2))/2 = 2.
  //   split: max(A[0][0][0] = 1, 1) = 1, plus with a ratio the input
  //   transfer 2*1e9/(1e9*1)/ratio: ratio 1 -> 2 (ties, data parallel
  //   stays), ratio 4 -> 0.5 (split at 1).
  Profile p;
  p.layers = {{"a", 1, 0, 0, 1'000'000'000, 1'000'000'000, {}, 0}, {"b", 1, 0, 0, 0, 0, {}, 0}};
  Topology t;
  t.levels = {{2, 1e9}};
  Plan free = partition_pipedream(p, t);
  EXPECT_EQ(free.config(), "straight");
  EXPECT_DOUBLE_EQ(free.time_per_minibatch_s, 1.0);
  PipeDreamOptions o;
  o.compression_ratio = 1;
  Plan counted = partition_pipedream(p, t, o);
  EXPECT_EQ(counted.config(), "2");
  EXPECT_DOUBLE_EQ(counted.time_per_minibatch_s, 2.0);
  o.compression_ratio = 4;
  Plan compressed = partition_pipedream(p, t, o);
  EXPECT_EQ(compressed.config(), "straight");
  EXPECT_DOUBLE_EQ(compressed.time_per_minibatch_s, 1.0);
}

TEST(PipeDreamCompat, UsesEveryWorker) {
  // One heavy layer and three free ones on 4 machines: data parallel at
  // 8/4 = 2 beats any split (layer a on 3 machines alone takes 8/3).
  Profile p;
  p.layers = {{"a", 8, 0, 0, 0, 0, {}, 0},
              {"b", 0, 0, 0, 0, 0, {}, 0},
              {"c", 0, 0, 0, 0, 0, {}, 0},
              {"d", 0, 0, 0, 0, 0, {}, 0}};
  Topology t;
  t.levels = {{4, 1e9}};
  Plan ref = partition_pipedream(p, t);
  EXPECT_EQ(ref.workers_used(), 4);
  EXPECT_DOUBLE_EQ(ref.time_per_minibatch_s, 2.0);
  EXPECT_EQ(ref.config(), "4");
}

TEST(PipeDreamCompat, LevelByLevelCannotSpanAFractionOfAServer) {
  // 4 servers x 4 GPUs: every stage's replica count is a multiple of 4 or
  // lies inside one server, so 15-1 never comes out.
  Profile p;
  for (int i = 0; i < 13; ++i)
    p.layers.push_back({"conv", 10e-3, 20e-3, 25'000'000, 6'000'000, 4'000'000, {}});
  for (int i = 0; i < 13; ++i) p.layers[i].name += char('a' + i);
  p.layers.push_back({"fc6", 1e-3, 2e-3, 16'384, 16'384, 411'000'000, {}});
  p.layers.push_back({"fc7", 0.2e-3, 0.4e-3, 16'384, 16'384, 67'000'000, {}});
  p.layers.push_back({"fc8", 0.05e-3, 0.1e-3, 4'000, 0, 16'000'000, {}});
  Topology t;
  t.levels = {{4, 2.5e9}, {4, 10e9}};
  Plan ref = partition_pipedream(p, t);
  EXPECT_NE(ref.config(), "15-1");
  EXPECT_EQ(ref.workers_used(), 16);
  EXPECT_EQ(partition(p, t).config(), "15-1");
}

TEST(PipeDreamCompat, PrunedScanGivesTheExhaustiveScansAnswers) {
  // The pruned scan of each cell's split points against the reference's
  // scan of every one (PipeDreamOptions::exhaustive): the same stages, workers and
  // times on random chains (zero-cost layers included, for ties; 150 layers
  // in a few), one and two levels, with and without the reference's options.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> t(1e-4, 5e-3);
  std::uniform_int_distribution<int64_t> bytes(1 << 16, 1 << 26);
  std::uniform_int_distribution<int> coin(0, 5);
  int compared = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = trial % 50 == 7 ? 150 : 2 + trial % 40;  // long chains: wide bisections
    Profile p;
    for (int i = 0; i < n; ++i) {
      const double f = coin(rng) == 0 ? 0.0 : t(rng);
      std::string name = "l";  // (not "l" + to_string: GCC 12's -Wrestrict false positive)
      name += std::to_string(i);
      p.layers.push_back({name, f, 2 * f, bytes(rng), bytes(rng),
                          coin(rng) == 0 ? 0 : bytes(rng), {}, 0});
    }
    Topology top;
    if (trial % 3 == 0)
      top.levels = {{2 + trial % 7, 10e9}};
    else
      top.levels = {{2 + trial % 3, 12.5e9}, {2 + trial % 4, 150e9}};
    PipeDreamOptions o;
    o.straight = trial % 5 == 1;
    o.fewer_workers = trial % 4 == 2;
    if (trial % 7 == 4) o.compression_ratio = 2.0;
    if (trial % 6 == 3) {
      o.memory_limit = true;
      top.memory_bytes = 6e8;
    }
    PipeDreamOptions slow = o;
    slow.exhaustive = true;
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + std::to_string(n) + " layers on " +
                 top.describe());
    std::optional<Plan> fast_plan, slow_plan;
    try {
      slow_plan = partition_pipedream(p, top, slow);
    } catch (const PlanError&) {
      EXPECT_THROW(partition_pipedream(p, top, o), PlanError);
      continue;
    }
    fast_plan = partition_pipedream(p, top, o);
    EXPECT_EQ(fast_plan->time_per_minibatch_s, slow_plan->time_per_minibatch_s);
    ASSERT_EQ(fast_plan->stages.size(), slow_plan->stages.size());
    for (size_t s = 0; s < slow_plan->stages.size(); ++s) {
      EXPECT_EQ(fast_plan->stages[s].first_layer, slow_plan->stages[s].first_layer) << "stage " << s;
      EXPECT_EQ(fast_plan->stages[s].workers, slow_plan->stages[s].workers) << "stage " << s;
    }
    ++compared;
  }
  EXPECT_GE(compared, 300);  // most configurations fit
}

}  // namespace
}  // namespace pipetrain::partitioner
