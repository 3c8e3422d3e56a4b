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

Plan v_balanced_plan(const Profile& profile, const Topology& topology) {
  const int n = static_cast<int>(profile.layers.size()), stages = topology.workers();
  const int workers = stages / 2;
  if (stages < 2 || stages % 2 != 0 || n < stages)
    throw PlanError(
        fmt::format("a V of {} virtual stages needs an even count of at least 2 and "
                    "as many layers; the model has {}",
                    stages, n));
  std::vector<double> w, prefix = {0.0};
  for (const auto& l : profile.layers) {
    w.push_back(l.forward_s + l.backward_s);
    prefix.push_back(prefix.back() + w.back());
  }
  std::vector<int> ends = balanced_cuts(w, stages);  // ends[s]: the last layer of stage s
  // (busiest worker, sum of squared loads) of a cut; lower is better.
  auto score = [&](const std::vector<int>& e) {
    double most = 0, squares = 0;
    for (int k = 0; k < workers; ++k) {
      double load = 0;
      for (int s : {k, stages - 1 - k}) {
        const int first = s == 0 ? 0 : e[static_cast<size_t>(s) - 1] + 1;
        load += prefix[static_cast<size_t>(e[static_cast<size_t>(s)]) + 1] -
                prefix[static_cast<size_t>(first)];
      }
      most = std::max(most, load);
      squares += load * load;
    }
    return std::make_pair(most, squares);
  };
  // Moves of one cut, then of two cuts at once (a worker's two chunks shift
  // together), until none lowers the score.
  auto best = score(ends);
  auto range = [&](int c) {
    return std::make_pair(c == 0 ? 0 : ends[static_cast<size_t>(c) - 1] + 1,
                          ends[static_cast<size_t>(c) + 1] - 1);
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int c = 0; c + 1 < stages; ++c) {  // cut c: the last layer of stage c
      const auto [lo, hi] = range(c);
      const int kept = ends[static_cast<size_t>(c)];
      int best_at = kept;
      for (int at = lo; at <= hi; ++at) {
        ends[static_cast<size_t>(c)] = at;
        if (const auto sc = score(ends); sc < best) best = sc, best_at = at;
      }
      ends[static_cast<size_t>(c)] = best_at;
      moved = moved || best_at != kept;
    }
    for (int c = 0; c + 1 < stages && !moved; ++c)
      for (int d = c + 1; d + 1 < stages && !moved; ++d) {
        const int kept_c = ends[static_cast<size_t>(c)], kept_d = ends[static_cast<size_t>(d)];
        const int lo_c = range(c).first, hi_d = range(d).second;
        for (int at_c = lo_c; at_c < ends[static_cast<size_t>(c) + 1] && !moved; ++at_c) {
          ends[static_cast<size_t>(c)] = at_c;
          const int lo_d = std::max(ends[static_cast<size_t>(d) - 1] + 1, at_c + 1);
          for (int at_d = lo_d; at_d <= hi_d; ++at_d) {
            ends[static_cast<size_t>(d)] = at_d;
            if (const auto sc = score(ends); sc < best) {
              best = sc, moved = true;
              break;
            }
          }
          if (!moved) ends[static_cast<size_t>(d)] = kept_d;
        }
        if (!moved) ends[static_cast<size_t>(c)] = kept_c;
      }
  }
  return evaluate_plan(profile, topology, ends, std::vector<int>(static_cast<size_t>(stages), 1),
                       "v-balanced");
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
