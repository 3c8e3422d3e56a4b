#include "partitioner/dp.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ir/error.h"
#include "partitioner/cost_model.h"

namespace pipetrain::partitioner {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The DP runs over suffixes: B(i, u) is the best time per minibatch of layers
// i..n-1 on the last u workers [N-u, N), all of them used. The first stage
// of the suffix, layers i..k on r workers starting at N-u, then has exactly u
// workers downstream (itself included), which fixes its in-flight count and
// memory; the workers it sits on are fixed too, so links are known.
//
//   B(i, u) = min( T(i..n-1 on u),
//                  min over k in [i, n-1), r in [1, u) of
//                    max( T(i..k on r, u downstream), B(k+1, u-r) ) )
//
// A stage over the memory limit is costed with activation recomputation
// (cost_model.h) when that fits: more time, less memory.
//
// Each cell also keeps E(i, u), its plan's messages and recomputed forwards
// (cost_model.h's round trip), so a first stage's round-trip bound is known:
// max(T, B, round trip) is what the simulator's asynchronous 1F1B measures.
// E is the best-time suffix's, not the smallest over all suffixes (a Pareto
// set per cell would be exact); equal times prefer the smaller E.
//
// Pruning (exact): T(i..k on r) >= C(i..k) / r grows with k, and B(k+1, u-r)
// >= C(k+1..n-1) / (u-r) (any plan's slowest stage is at least its average),
// which shrinks with k; so only k with both bounds below the best so far can
// win. The second bound gives the first k to try (galloping on from the
// previous r's, since it only moves right), the first ends the loop.
struct SuffixDp {
  const ChainCosts& costs;
  const PartitionOptions& options;
  int n, workers;
  double memory;
  std::vector<double> best;        // (n + 1) x (workers + 1)
  std::vector<int> split_k, reps;  // choice: first stage ends at k, on r workers
  std::vector<char> again;         // choice: that stage recomputes its activations
  std::vector<double> extra;       // E(i, u): messages and recomputed forwards of the plan
  std::vector<RoundShape> shape;   // its first stage's rounds (cost_model.h's lockstep wait)
  // Where first_beating's walk starts: a table over the compute prefix sums
  // P(x) = C(0..x-1), bucket q holding the first x with P(x) > q * bucket.
  // Without it the walks were 26 million steps of the 1,000-layer,
  // 64-worker solve (13 per cell and replication count).
  double total = 0, bucket = 0, per_bucket = 0;  // per_bucket = 1 / bucket
  std::vector<int> first_above;

  SuffixDp(const ChainCosts& c, const PartitionOptions& o)
      : costs(c), options(o), n(c.size()), workers(c.topology().workers()) {
    memory = options.memory_limit ? c.topology().memory_bytes : 0;
    size_t cells = size_t(n + 1) * (workers + 1);
    best.assign(cells, kInf);
    split_k.assign(cells, -1);
    reps.assign(cells, 0);
    again.assign(cells, 0);
    extra.assign(cells, 0.0);
    shape.assign(cells, RoundShape{});
    total = costs.compute(0, n - 1);
    bucket = total / (4.0 * n);  // four buckets a layer: under one layer in each on average
    if (!(bucket > 0) || !std::isfinite(bucket)) return;
    per_bucket = 1.0 / bucket;
    first_above.resize(size_t(4) * n + 1);
    int x = 0;
    for (size_t q = 0; q < first_above.size(); ++q) {
      while (x <= n && prefix(x) <= static_cast<double>(q) * bucket) ++x;
      first_above[q] = x;
    }
  }
  double prefix(int x) const { return x == 0 ? 0.0 : costs.compute(0, x - 1); }
  // Column-major in i: the inner loop reads best(k + 1, rest) over consecutive k.
  size_t at(int i, int u) const { return size_t(u) * (n + 1) + i; }

  bool fits(const StageCost& c) const { return memory <= 0 || c.memory_bytes <= memory; }

  // The smallest k in [from, n - 1) with C(k+1..n-1) < limit (n - 1: none),
  // for C(from..n-1) decreasing in from: doubling steps, then bisection.
  int first_beating(int from, double limit) const {
    auto beats = [&](int k) { return k >= n - 1 || costs.compute(k + 1, n - 1) < limit; };
    // Every k below the table's start has P(k+1) <= threshold (give or take
    // the product's rounding), so C(k+1..n-1) >= limit with a margin far
    // above the sums' rounding.
    const double threshold = total - limit - 1e-9 * total;
    if (!first_above.empty() && threshold >= bucket) {
      const size_t q =
          std::min(first_above.size() - 1, static_cast<size_t>(threshold * per_bucket));
      from = std::clamp(first_above[q] - 1, from, n - 1);
    }
    // Usually a few layers on: walk them (predictable branches), then gallop.
    for (int end = std::min(n - 1, from + 16); from < end; ++from)
      if (beats(from)) return from;
    if (beats(from)) return from;
    int bad = from, step = 1;  // beats(bad) is false
    int good = std::min(n - 1, from + step);
    while (!beats(good)) {
      bad = good;
      step *= 2;
      good = std::min(n - 1, good + step);
    }
    while (good - bad > 1) {
      const int mid = bad + (good - bad) / 2;
      (beats(mid) ? good : bad) = mid;
    }
    return good;
  }

  void solve() {
    for (int i = n - 1; i >= 0; --i)
      for (int u = 1; u <= workers; ++u) solve_cell(i, u);
  }

  void solve_cell(int i, int u) {
    const int first = workers - u;
    double& b = best[at(i, u)];
    // One stage for the whole suffix, replicated on all u workers.
    if (!options.straight || u == 1) {
      StageCost c = costs.stage(i, n - 1, first, u, u);
      if (!fits(c)) c = costs.stage(i, n - 1, first, u, u, /*recompute=*/true);
      if (fits(c)) {
        b = c.time_s;
        split_k[at(i, u)] = n - 1;
        reps[at(i, u)] = u;
        again[at(i, u)] = c.recompute;
        extra[at(i, u)] = c.recompute ? costs.forward(i, n - 1) : 0.0;
        shape[at(i, u)] = round_shape(c.allreduce_s, u, c.time_s);
      }
    }
    const double tail = costs.compute(i, n - 1);
    const int max_r = options.straight ? std::min(1, u - 1) : u - 1;
    // Smallest k whose suffix C(k+1..n-1) / rest can beat b: it only moves
    // right as r grows (rest shrinks, b never grows), so each r gallops on
    // from the last one's instead of searching [i, n-1) again.
    int lo = i;
    for (int r = 1; r <= max_r; ++r) {
      const int rest = u - r;
      if (b < kInf) lo = first_beating(lo, b * rest);
      const double head_limit = b * r;
      // No k left to try: skip the stage's links too.
      if (lo >= n - 1 || tail - costs.compute(lo + 1, n - 1) >= head_limit) continue;
      const ChainCosts::StageTimer timer(costs, i, first, r);  // links looked up once
      // Only a memory limit can call for recomputation.
      std::optional<ChainCosts::StageTimer> recomputing;
      if (memory > 0) recomputing.emplace(costs, i, first, r, /*recompute=*/true);
      for (int k = lo; k < n - 1; ++k) {
        if (tail - costs.compute(k + 1, n - 1) >= head_limit) break;  // C(i..k) / r >= b
        if (timer.allreduce_s(k) >= b) break;                         // grows with k too
        double rest_time = best[at(k + 1, rest)];
        if (rest_time >= b) continue;
        bool recompute = false;
        if (memory > 0 && costs.memory(i, k, r, u) > memory) {
          if (costs.memory(i, k, r, u, /*recompute=*/true) > memory) continue;
          recompute = true;
        }
        const double own = recompute ? recomputing->time(k) : timer.time(k);
        double t = std::max(own, rest_time);
        if (t > b) continue;  // the round trip only adds
        const RoundShape mine = round_shape(timer.allreduce_s(k), r, own);
        const double e = 2.0 * costs.message(k, first, r + reps[at(k + 1, rest)]) +
                         (recompute ? costs.forward(i, k) : 0.0) + extra[at(k + 1, rest)] +
                         lockstep_waits(mine, shape[at(k + 1, rest)]);
        t = std::max(t, costs.round_trip(i, r, u, e));
        if (t < b || (t == b && e < extra[at(i, u)])) {
          b = t;
          split_k[at(i, u)] = k;
          reps[at(i, u)] = r;
          again[at(i, u)] = recompute;
          extra[at(i, u)] = e;
          shape[at(i, u)] = mine;
        }
      }
    }
  }
};

}  // namespace

Plan partition(const Profile& profile, const Topology& topology, const PartitionOptions& options) {
  validate(profile);
  validate(topology);
  ChainCosts costs(profile, topology);
  SuffixDp dp(costs, options);
  dp.solve();
  const int n = costs.size(), workers = topology.workers();
  int used = workers;
  if (options.fewer_workers)
    for (int m = 1; m <= workers; ++m)
      if (dp.best[dp.at(0, m)] < dp.best[dp.at(0, used)]) used = m;
  if (dp.best[dp.at(0, used)] == kInf) {
    if (options.straight && n < workers && !options.fewer_workers)
      throw PlanError(
          fmt::format("a straight pipeline on {} workers needs at least {} layers; the "
                      "profile has {} (allow fewer workers)",
                      workers, workers, n));
    throw PlanError(
        fmt::format("no partition of the {} layers on {} workers fits {:.3g} GB per "
                    "worker, even with activation recomputation",
                    n, workers, topology.memory_bytes / 1e9));
  }
  std::vector<int> last_layers, replication;
  std::vector<bool> recompute;
  for (int i = 0, u = used; i < n;) {
    int k = dp.split_k[dp.at(i, u)], r = dp.reps[dp.at(i, u)];
    last_layers.push_back(k);
    replication.push_back(r);
    recompute.push_back(dp.again[dp.at(i, u)] != 0);
    i = k + 1;
    u -= r;
  }
  Plan plan =
      evaluate_plan(profile, topology, last_layers, replication, "dp", workers - used, recompute);
  plan.cost_model = "pipetrain";
  return plan;
}

}  // namespace pipetrain::partitioner
