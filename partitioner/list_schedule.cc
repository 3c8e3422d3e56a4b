#include "partitioner/list_schedule.h"

#include <algorithm>
#include <deque>

namespace pipetrain::partitioner {

namespace {
constexpr double kNever = std::numeric_limits<double>::infinity();
}  // namespace

std::optional<std::vector<std::vector<ScheduleOp>>> list_schedule(const std::vector<int>& placement,
                                                                  int workers, int m,
                                                                  const ListScheduleLimits& limits,
                                                                  const OpDurations& time) {
  const int n = static_cast<int>(placement.size());
  auto cost = [&](int st, OpKind k) {
    auto it = time.find({st, k});
    return it == time.end() ? 0.0 : it->second;
  };
  std::vector<std::vector<double>> f_end(n, std::vector<double>(m, kNever)), b_end = f_end;
  std::vector<int> next_f(n, 0), next_b(n, 0), stashed(workers, 0);
  std::vector<double> clock(workers, 0.0);
  std::vector<std::deque<std::pair<int, int>>> owed(workers);  // W's owed, oldest first
  std::vector<std::vector<ScheduleOp>> actions(workers);
  for (int left = 3 * n * m; left > 0; --left) {
    // Per worker its best op; globally the earliest start, lower worker first.
    int pick_w = -1;
    ScheduleOp pick;
    double pick_start = kNever;
    for (int w = 0; w < workers; ++w) {
      double best = kNever;
      int rank = 3;  // B 0, F 1, W 2: the tie order
      ScheduleOp op;
      auto offer = [&](double start, int r, ScheduleOp o) {
        // Earlier wins; on a tie the kind's rank, then the later stage (nearer the loss).
        if (start < best || (start == best && (r < rank || (r == rank && o.stage > op.stage))))
          best = start, rank = r, op = o;
      };
      for (int st = n - 1; st >= 0; --st) {
        if (placement[static_cast<size_t>(st)] != w) continue;
        if (const int mb = next_b[st]; mb < next_f[st]) {
          const double in = st + 1 == n ? f_end[st][mb] : b_end[st + 1][mb];
          if (in < kNever) offer(std::max(clock[w], in), 0, {OpKind::kBackwardInput, st, mb});
        }
        // A first stage's F admits a microbatch into the pipeline: only within the window.
        const bool admits = st > 0 || next_f[0] - next_b[0] < limits.window;
        if (const int mb = next_f[st]; mb < m && stashed[w] < limits.stash && admits) {
          const double in = st == 0 ? 0.0 : f_end[st - 1][mb];
          if (in < kNever) offer(std::max(clock[w], in), 1, {OpKind::kForward, st, mb});
        }
      }
      if (!owed[w].empty())
        offer(clock[w], 2,
              {OpKind::kBackwardWeight, owed[w].front().first, owed[w].front().second});
      if (best < pick_start) pick_start = best, pick_w = w, pick = op;
    }
    if (pick_w < 0) return std::nullopt;
    const int w = pick_w, st = pick.stage, mb = pick.microbatch;
    clock[w] = pick_start + cost(st, pick.kind);
    if (pick.kind == OpKind::kForward) {
      f_end[st][mb] = clock[w];
      ++next_f[st];
      ++stashed[w];
    } else if (pick.kind == OpKind::kBackwardInput) {
      b_end[st][mb] = clock[w];
      ++next_b[st];
      owed[w].emplace_back(st, mb);
    } else {
      owed[w].pop_front();
      --stashed[w];
    }
    actions[w].push_back(pick);
  }
  return actions;
}

}  // namespace pipetrain::partitioner
