#include "partitioner/baselines.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "ir/error.h"
#include "partitioner/cost_model.h"

namespace pipetrain::partitioner {

namespace {

int straight_stages(const Profile& profile, const Topology& topology) {
  return std::min<int>(topology.workers(), static_cast<int>(profile.layers.size()));
}

// Greedy: close a group when adding the next weight would exceed `limit`.
// Returns the number of groups used, or parts + 1 if a single weight is over.
int greedy(const std::vector<double>& w, int parts, double limit, std::vector<int>* ends) {
  int n = static_cast<int>(w.size()), groups = 0;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    if (w[i] > limit) return parts + 1;
    bool must_close = sum > 0 && sum + w[i] > limit;
    if (must_close) {
      if (ends) ends->push_back(i - 1);
      ++groups;
      sum = 0;
    }
    sum += w[i];
  }
  if (ends) ends->push_back(n - 1);
  return groups + 1;
}

}  // namespace

std::vector<int> balanced_cuts(const std::vector<double>& weights, int parts) {
  int n = static_cast<int>(weights.size());
  parts = std::max(1, std::min(parts, n));
  double lo = *std::max_element(weights.begin(), weights.end());
  double hi = std::accumulate(weights.begin(), weights.end(), 0.0);
  // Bisection on the bottleneck: greedy with limit L needs <= parts groups iff
  // some partition into `parts` groups has bottleneck <= L.
  for (int it = 0; it < 100 && hi - lo > 1e-12 * std::max(1.0, hi); ++it) {
    double mid = 0.5 * (lo + hi);
    if (greedy(weights, parts, mid, nullptr) <= parts)
      hi = mid;
    else
      lo = mid;
  }
  std::vector<int> ends;
  greedy(weights, parts, hi, &ends);
  // Fewer groups than parts: split the largest groups (never raises the max).
  while (static_cast<int>(ends.size()) < parts) {
    int best = -1, best_len = 0, begin = 0;
    for (size_t g = 0; g < ends.size(); ++g) {
      int len = ends[g] - begin + 1;
      if (len > 1 && (best < 0 || len > best_len)) best = static_cast<int>(g), best_len = len;
      begin = ends[g] + 1;
    }
    int start = best == 0 ? 0 : ends[best - 1] + 1;
    ends.insert(ends.begin() + best, start + best_len / 2 - 1);
  }
  return ends;
}

Plan data_parallel_plan(const Profile& profile, const Topology& topology) {
  return evaluate_plan(profile, topology, {static_cast<int>(profile.layers.size()) - 1},
                       {topology.workers()}, "data-parallel");
}

Plan equal_layers_plan(const Profile& profile, const Topology& topology) {
  int p = straight_stages(profile, topology), n = static_cast<int>(profile.layers.size());
  std::vector<int> ends;
  // Stage s gets layers [s n / p, (s + 1) n / p).
  for (int s = 0; s < p; ++s) ends.push_back(static_cast<int>(int64_t(s + 1) * n / p) - 1);
  return evaluate_plan(profile, topology, ends, std::vector<int>(p, 1), "equal-layers");
}

Plan time_balanced_plan(const Profile& profile, const Topology& topology) {
  std::vector<double> w;
  for (const auto& l : profile.layers) w.push_back(l.forward_s + l.backward_s);
  int p = straight_stages(profile, topology);
  return evaluate_plan(profile, topology, balanced_cuts(w, p), std::vector<int>(p, 1),
                       "time-balanced");
}

Plan param_balanced_plan(const Profile& profile, const Topology& topology) {
  std::vector<double> w;
  for (const auto& l : profile.layers) w.push_back(static_cast<double>(l.param_bytes));
  int p = straight_stages(profile, topology);
  return evaluate_plan(profile, topology, balanced_cuts(w, p), std::vector<int>(p, 1),
                       "param-balanced");
}

std::vector<Plan> baseline_plans(const Profile& profile, const Topology& topology) {
  return {data_parallel_plan(profile, topology), equal_layers_plan(profile, topology),
          time_balanced_plan(profile, topology), param_balanced_plan(profile, topology)};
}

Plan config_plan(const Profile& profile, const Topology& topology,
                 const std::vector<int>& replication) {
  const int n = static_cast<int>(profile.layers.size());
  const int stages = static_cast<int>(replication.size());
  int total = 0;
  for (int r : replication) {
    if (r < 1) throw PlanError("every stage needs at least one worker");
    total += r;
  }
  if (stages < 1 || stages > n || total > topology.workers())
    throw PlanError(fmt::format("config of {} stages on {} workers does not fit {} layers on {}",
                                stages, total, n, topology.describe()));
  ChainCosts costs(profile, topology);
  // best[s][j]: the slowest of stages 0..s when stage s ends at layer j;
  // from[s][j]: the last layer of stage s - 1 on that optimum.
  const double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages, std::vector<double>(n, kInf));
  std::vector<std::vector<int>> from(stages, std::vector<int>(n, -1));
  for (int s = 0, first = 0; s < stages; first += replication[s++]) {
    for (int j = s; j < n - (stages - 1 - s); ++j) {
      for (int i = s; i <= j; ++i) {  // stage s covers layers i..j
        double before = s == 0 ? (i == 0 ? 0.0 : kInf) : best[s - 1][i - 1];
        if (before == kInf) continue;
        double t = std::max(before, costs.stage(i, j, first, replication[s], total - first).time_s);
        if (t < best[s][j]) best[s][j] = t, from[s][j] = i - 1;
      }
    }
  }
  std::vector<int> last(stages);
  for (int s = stages - 1, j = n - 1; s >= 0; j = from[s--][j]) last[s] = j;
  return evaluate_plan(profile, topology, last, replication,
                       fmt::format("config {}", fmt::join(replication, "-")));
}

}  // namespace pipetrain::partitioner
