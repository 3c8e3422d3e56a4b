// DP solve time against chain length and worker count (pipetrain cost model,
// two-level topologies). The bound the issue sets: a 1,000-layer chain on 64
// workers in two levels solves in under a second (BM_Dp/1000/64).
// The reference's level-by-level solve is O(n^3 N^2) (BM_DpPipeDreamExhaustive);
// --cost-model pipedream prunes the lowest level's scans for the same answers
// (BM_DpPipeDream): a split's last stage and its first part are each bounded by
// their average stage, which leaves a window of a few split points per cell.
#include <benchmark/benchmark.h>

#include <random>
#include <sstream>

#include "partitioner/dp.h"

namespace {

using namespace pipetrain::partitioner;

Profile random_chain(int n) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> t(1e-4, 5e-3);
  std::uniform_int_distribution<int64_t> bytes(1 << 16, 1 << 26);
  Profile p;
  for (int i = 0; i < n; ++i) {
    double f = t(rng);
    std::ostringstream name;
    name << "l" << i;
    p.layers.push_back({name.str(), f, 2 * f, bytes(rng), bytes(rng), bytes(rng), {}});
  }
  return p;
}

// Workers as servers x 8 GPUs (fewer than 8: one server).
Topology two_levels(int workers) {
  Topology t;
  int inner = std::min(workers, 8);
  t.levels = {{workers / inner, 12.5e9}, {inner, 150e9}};
  return t;
}

void BM_Dp(benchmark::State& state) {
  Profile p = random_chain(static_cast<int>(state.range(0)));
  Topology t = two_levels(static_cast<int>(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(partition(p, t));
  state.SetLabel(partition(p, t).config());
}
BENCHMARK(BM_Dp)->ArgsProduct({{50, 200, 1000}, {8, 16, 64}})->Unit(benchmark::kMillisecond);

void BM_DpPipeDream(benchmark::State& state) {
  Profile p = random_chain(static_cast<int>(state.range(0)));
  Topology t = two_levels(static_cast<int>(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(partition_pipedream(p, t));
}
BENCHMARK(BM_DpPipeDream)
    ->ArgsProduct({{50, 100, 200, 1000}, {16, 64}})
    ->Unit(benchmark::kMillisecond);

void BM_DpPipeDreamExhaustive(benchmark::State& state) {
  Profile p = random_chain(static_cast<int>(state.range(0)));
  Topology t = two_levels(static_cast<int>(state.range(1)));
  PipeDreamOptions o;
  o.exhaustive = true;
  for (auto _ : state) benchmark::DoNotOptimize(partition_pipedream(p, t, o));
}
BENCHMARK(BM_DpPipeDreamExhaustive)
    ->ArgsProduct({{50, 100, 200}, {16, 64}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
