#include "cli/op_time_table.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>

#include "ir/cost.h"

namespace pipetrain::cli {

// Time per op type over all runs, largest first, with the share of the total.
void print_profile(const ir::Graph& g, const std::vector<double>& node_seconds, int runs) {
  std::map<std::string, std::pair<double, int>> by_op;
  double total = 0;
  for (size_t i = 0; i < node_seconds.size(); ++i) {
    by_op[g.nodes[i].op_type].first += node_seconds[i];
    by_op[g.nodes[i].op_type].second += 1;
    total += node_seconds[i];
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_op.begin(), by_op.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  fmt::print("time per op type (mean of {} run{}):\n", runs, runs == 1 ? "" : "s");
  for (const auto& [op, v] : rows)
    fmt::print("  {:<26} {:>4} nodes {:>10.2f} ms {:>6.1f}%\n", op, v.second, v.first * 1e3 / runs,
               total > 0 ? 100 * v.first / total : 0.0);
  std::vector<size_t> idx(node_seconds.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(),
            [&](size_t a, size_t b) { return node_seconds[a] > node_seconds[b]; });
  fmt::print("slowest nodes:\n");
  for (size_t k = 0; k < std::min<size_t>(10, idx.size()); ++k) {
    const ir::Node& n = g.nodes[idx[k]];
    double sec = node_seconds[idx[k]] / runs;
    fmt::print("  {:<44} {:>9.2f} ms {:>7.1f} GFLOP/s\n", n.op_type + " " + n.name, sec * 1e3,
               sec > 0 ? double(ir::node_flops(g, n)) / sec * 1e-9 : 0.0);
  }
}

}  // namespace pipetrain::cli
