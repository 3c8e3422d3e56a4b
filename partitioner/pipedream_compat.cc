// The reference optimizer (PipeDream's optimizer_graph_hierarchical.py),
// reproduced formula for formula so both give the same stages and times on
// the same graph.txt. Python's None is a NaN here; the iteration order over
// split points is ascending (the reference iterates a Python set, so its ties
// can fall either way).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ir/error.h"
#include "partitioner/cost_model.h"
#include "partitioner/dp.h"

namespace pipetrain::partitioner {

namespace {

using Opt = std::optional<double>;

struct Cell {
  Opt time;
  int split_k = -1, split_m = -1;  // (k, m - m') of the reference; -1: none
  int machines = 0;
};

// A[i][j][m]: rows i in [0, n] (row i = chain positions i..j), m = machines - 1.
struct Table {
  int rows, n, machines;
  std::vector<Cell> cells;
  Table(int r, int n_, int m) : rows(r), n(n_), machines(m), cells(size_t(r) * n_ * m) {}
  Cell& at(int i, int j, int m) { return cells[(size_t(i) * n + j) * machines + m]; }
};

// A range's compute (c), activations (a) and parameters (p) for chain
// positions i..j (row 0 is layers 0..j, row i > 0 layers i..j): differences of
// prefix sums, as the reference's matrices hold them. Only c changes between
// levels (a level's times become the next level's compute), so it alone is a
// table, column-major so that a split scan's reads of c(k + 1, j) over
// consecutive k share cache lines; a and p, read at the same points, come from
// the prefix sums in L1.
struct Matrices {
  int n;
  std::vector<Opt> compute;                      // (n + 1) x n; none where j < i
  std::vector<double> cum_c, cum_a, cum_p;       // n prefix sums
  std::vector<double> out_act;                   // n
  size_t at(int i, int j) const { return size_t(j) * (n + 1) + i; }
  Opt& c(int i, int j) { return compute[at(i, j)]; }
  static double range(const std::vector<double>& cum, int i, int j) {
    return i == 0 ? cum[j] : cum[j] - cum[i - 1];
  }
  double a(int i, int j) const { return range(cum_a, i, j); }  // j >= i
  double p(int i, int j) const { return range(cum_p, i, j); }
  double prefix_c(int i, int j) const { return range(cum_c, i, j); }  // the lowest level's c
};

Matrices build_matrices(const Profile& profile) {
  Matrices mx;
  int n = mx.n = static_cast<int>(profile.layers.size());
  // States: state j is everything up to layer j; its totals are cumulative.
  double c = 0, a = 0, p = 0;
  for (int j = 0; j < n; ++j) {
    const LayerProfile& l = profile.layers[j];
    mx.cum_c.push_back(c += l.forward_s + l.backward_s);
    mx.cum_a.push_back(a += static_cast<double>(l.output_bytes));
    mx.cum_p.push_back(p += static_cast<double>(l.param_bytes));
    mx.out_act.push_back(static_cast<double>(l.cut_bytes));
  }
  mx.compute.resize(size_t(n + 1) * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i <= j; ++i) mx.c(i, j) = mx.prefix_c(i, j);
  return mx;
}

// Python 3's math.ceil(a / b) for non-negative ints.
double ceil_div(int a, int b) {
  return std::ceil(static_cast<double>(a) / b);
}

// `prefix_sums`: mx's compute and params of a range are differences of
// prefix sums (the lowest level; above it they are the level below's times).
Table compute_partitioning(Matrices& mx, int num_machines, int within, double bandwidth,
                           bool final_level, bool prefix_sums, const PipeDreamOptions& o,
                           double memory) {
  const int n = mx.n, rows = n + 1;
  Table A(rows, n, num_machines);
  const bool use_memory = o.memory_limit && memory > 0;
  for (int i = 0; i < rows; ++i)
    for (int j = i; j < n; ++j) {
      const Opt cum_c = mx.c(i, j);
      const double cum_a = mx.a(i, j), cum_p = mx.p(i, j);
      int max_m = o.straight ? 1 : num_machines;
      for (int m = 0; m < max_m; ++m) {
        if (!cum_c) continue;  // stays (None, None, None)
        double stashed = ceil_div(num_machines - (m + 1), m + 1) * (cum_a + cum_p);
        if (use_memory && stashed > memory) continue;
        double dp_comm = (4.0 * m * cum_p) / (bandwidth * (m + 1));
        dp_comm /= within;
        A.at(i, j, m) = {(*cum_c + dp_comm) / (m + 1), -1, -1, m + 1};
      }
    }
  const int max_i = final_level ? 1 : rows;
  std::vector<double> stash_copies(num_machines + 1);  // the reference's ceil, per m and mp
  for (int i = 0; i < max_i; ++i)
    for (int m = 1; m < num_machines; ++m) {
      for (int mp = 1; mp <= m; ++mp) stash_copies[mp] = ceil_div(num_machines - (m + 1), mp);
      for (int j = i + 1; j < n; ++j) {
        Cell best = A.at(i, j, m);
        if (o.fewer_workers) {
          const Cell& fewer = A.at(i, j, m - 1);
          if (!best.time || (fewer.time && *fewer.time < *best.time)) best = fewer;
        }
        // The reference's time for split k (chain i..k on m - mp + 1
        // machines, k + 1..j on mp); nothing where it skips the split.
        // (The same arithmetic as the reference's, in an order that computes
        // the transfers and the stash only where they count.)
        auto split_time = [&](int k, int mp, double* last_t_out) -> Opt {
          Opt last = mx.c(k + 1, j);
          if (!last) return std::nullopt;
          double last_p = mx.p(k + 1, j);
          if (use_memory) {
            double stashed = (mx.a(k + 1, j) + last_p) * stash_copies[mp];
            if (stashed > memory) return std::nullopt;
          }
          double last_t = (*last + (4.0 * (mp - 1) * last_p) / (bandwidth * mp)) / mp;
          if (last_t_out) *last_t_out = last_t;
          const Cell& prev = A.at(i, k, m - mp);
          if (!prev.time) return std::nullopt;
          double t = std::max(*prev.time, last_t);
          if (o.compression_ratio > 0) {
            double in_t = (2.0 * mx.out_act[k]) / (bandwidth * mp);
            t = std::max(t, in_t / o.compression_ratio);
            if (j < n - 1) {
              double out_t = (2.0 * mx.out_act[j]) / (bandwidth * mp);
              t = std::max(t, out_t / o.compression_ratio);
            }
          }
          return t;
        };
        const int k_lo = i > 0 ? i - 1 : 0;  // the chain's predecessors of state j
        const int max_mp = o.straight ? 2 : m + 1;
        if (o.exhaustive || !prefix_sums) {
          // The reference's order: k ascending, then mp; a strict improvement wins.
          for (int k = k_lo; k < j; ++k)
            for (int mp = 1; mp < max_mp; ++mp)
              if (Opt t = split_time(k, mp, nullptr); t && (!best.time || *best.time > *t))
                best = {*t, k, m - mp, mp};
        } else {
          // Every split's time is at least its last stage's, which only
          // grows as k falls (its layers' sums are prefix-sum differences
          // here, monotone even rounded; too big for the memory stays too
          // big): scanning k downwards, a last stage slower than the best
          // so far ends the scan. Ties go where the reference's order puts
          // them (the smallest k, then the smallest mp; the unsplit cell
          // unless strictly beaten), so the answer is the same.
          //
          // And the first part's time A(i, k, m - mp) is at least its average,
          // C(i..k) / (m - mp + 1) (no plan's slowest stage beats it; the slack
          // covers rounding), which grows with k: the scan starts below the k
          // whose first part alone is slower than the best so far, found by
          // bisection. Both bounds leave a window of a few splits around the
          // balance point; the skipped ones are strictly slower, so no tie moves.
          constexpr double kInf = std::numeric_limits<double>::infinity();
          double best_t = best.time ? *best.time : kInf;
          int best_k = -1, best_mp = -1;
          for (int mp = 1; mp < max_mp; ++mp) {
            const double parts = m - mp + 1;
            auto head_too_slow = [&](int k) {  // (k = i - 1: no head, false)
              return k >= i && mx.prefix_c(i, k) * (1 - 1e-9) > best_t * parts;
            };
            int start = j - 1;
            if (head_too_slow(start)) {
              int fast = k_lo - 1, slow = start;  // head_too_slow(slow); fast: not, or none
              while (slow - fast > 1) {
                const int mid = fast + (slow - fast) / 2;
                (head_too_slow(mid) ? slow : fast) = mid;
              }
              start = fast;
            }
            for (int k = start; k >= k_lo; --k) {
              double last_t = kInf;
              const Opt t = split_time(k, mp, &last_t);
              if (last_t > best_t) break;  // (and infeasible last stages: inf)
              if (!t) continue;
              const bool wins = *t < best_t || (*t == best_t && best_k >= 0 &&
                                                (k < best_k || (k == best_k && mp < best_mp)));
              if (wins) best_t = *t, best_k = k, best_mp = mp;
            }
          }
          if (best_k >= 0) best = {best_t, best_k, m - best_mp, best_mp};
        }
        A.at(i, j, m) = best;
      }
    }
  return A;
}

// One range [start, end) of states split at one level: returns the sub-stage
// ends (exclusive) and their machine counts at this level, first stage first.
void analyze(Table& A, int start, int end, int num_machines, std::vector<int>& ends,
             std::vector<int>& machines) {
  Cell meta = A.at(start, end - 1, num_machines - 1);
  if (!meta.time)
    throw PlanError(
        fmt::format("pipedream cost model: no configuration for layers {}..{} on {} "
                    "workers (memory limit?)",
                    start, end - 1, num_machines));
  std::vector<int> splits, reps;
  while (meta.split_k >= 0) {
    splits.push_back(meta.split_k + 1);
    reps.push_back(meta.machines);
    meta = A.at(start, meta.split_k, meta.split_m);
  }
  reps.push_back(meta.machines);
  std::reverse(splits.begin(), splits.end());
  std::reverse(reps.begin(), reps.end());
  splits.push_back(end);
  ends = splits;
  machines = reps;
}

}  // namespace

Plan partition_pipedream(const Profile& profile, const Topology& topology,
                         const PipeDreamOptions& options) {
  validate(profile);
  validate(topology);
  Matrices mx = build_matrices(profile);
  const int n = mx.n, levels = static_cast<int>(topology.levels.size());
  // The reference lists levels bottom up; ours are outermost first.
  std::vector<int> counts;
  std::vector<double> bandwidths;
  for (int l = levels - 1; l >= 0; --l) {
    counts.push_back(topology.levels[l].count);
    bandwidths.push_back(topology.levels[l].bandwidth);
  }
  std::vector<Table> tables;
  int within = 1;
  for (int l = 0; l < levels; ++l) {
    tables.push_back(compute_partitioning(mx, counts[l], within, bandwidths[l], l == levels - 1,
                                          l == 0, options, topology.memory_bytes));
    within = counts[l];
    // A range's best time on all of this level's machines is its compute
    // time on one component of the next level.
    for (int i = 0; i <= n; ++i)
      for (int j = 0; j < n; ++j) mx.c(i, j) = tables.back().at(i, j, counts[l] - 1).time;
  }
  Opt predicted = tables.back().at(0, n - 1, counts.back() - 1).time;
  if (!predicted)
    throw PlanError(
        fmt::format("pipedream cost model: no configuration of the {} layers fits on {}", n,
                    topology.describe()));

  // Walk down the levels. Each range carries the first worker of every
  // component that runs it (`bases`) and those components' size.
  struct Range {
    int start, end;
    std::vector<int> bases;
    int size;
  };
  std::vector<Range> ranges = {{0, n, {0}, topology.workers()}};
  for (int l = levels - 1; l >= 0; --l) {
    std::vector<Range> next;
    for (const Range& rg : ranges) {
      std::vector<int> ends, machines;
      analyze(tables[l], rg.start, rg.end, counts[l], ends, machines);
      int sub = rg.size / counts[l], offset = 0, start = rg.start;
      for (size_t s = 0; s < ends.size(); ++s) {
        Range child{start, ends[s], {}, sub};
        for (int b : rg.bases)
          for (int t = 0; t < machines[s]; ++t) child.bases.push_back(b + (offset + t) * sub);
        offset += machines[s];
        start = ends[s];
        next.push_back(std::move(child));
      }
    }
    ranges = std::move(next);
  }

  ChainCosts costs(profile, topology);
  Plan plan;
  plan.model = profile.model;
  plan.cost_model = "pipedream";
  plan.strategy = "dp";
  plan.topology = topology;
  plan.num_layers = n;
  int total = 0;
  for (const Range& rg : ranges) total += static_cast<int>(rg.bases.size());
  int downstream = total;
  for (const Range& rg : ranges) {
    StagePlan st;
    st.first_layer = rg.start;
    st.last_layer = rg.end - 1;
    st.first_layer_name = profile.layers[rg.start].name;
    st.last_layer_name = profile.layers[rg.end - 1].name;
    for (int l = rg.start; l < rg.end; ++l)
      st.nodes.insert(st.nodes.end(), profile.layers[l].nodes.begin(),
                      profile.layers[l].nodes.end());
    st.workers = rg.bases;
    std::sort(st.workers.begin(), st.workers.end());
    st.replication = static_cast<int>(st.workers.size());
    int r = st.replication;
    // Per stage, the reference's own accounting: allreduce added to compute
    // at the slowest link the replicas span, transfers only when compressed.
    double c = costs.compute(rg.start, rg.end - 1), p = costs.params(rg.start, rg.end - 1);
    double link =
        topology.slowest_link(st.workers.front(), st.workers.back() - st.workers.front() + 1);
    st.compute_s = c / r;
    st.allreduce_s = r > 1 ? 4.0 * (r - 1) * p / (link * r) / r : 0.0;
    if (options.compression_ratio > 0) {
      double b = topology.slowest_link(0, topology.workers());
      st.transfer_in_s = 2.0 * costs.cut(rg.start - 1) / (b * r) / options.compression_ratio;
      st.transfer_out_s = 2.0 * costs.cut(rg.end - 1) / (b * r) / options.compression_ratio;
    }
    st.time_s = std::max({st.compute_s + st.allreduce_s, st.transfer_in_s, st.transfer_out_s});
    st.in_flight = (downstream + r - 1) / r;
    st.memory_bytes = st.in_flight * (costs.activations(rg.start, rg.end - 1) + p) + p;
    downstream -= r;
    plan.stages.push_back(std::move(st));
  }
  plan.time_per_minibatch_s = *predicted;
  plan.noam = (total + plan.stages[0].replication - 1) / plan.stages[0].replication;
  plan.single_worker_s = costs.compute(0, n - 1);
  // Data parallel the reference's way: level by level, allreduce added.
  double dp = plan.single_worker_s, params = costs.params(0, n - 1);
  within = 1;
  for (int l = 0; l < levels; ++l) {
    double comm = (4.0 * (counts[l] - 1) * params) / (bandwidths[l] * counts[l]) / within;
    dp = (dp + comm) / counts[l];
    within = counts[l];
  }
  plan.data_parallel_s = dp;
  return plan;
}

}  // namespace pipetrain::partitioner
