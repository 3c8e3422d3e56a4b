#include "executor/pipeline/job_topology.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/pipeline/rank_reports.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

MessageTag probe_tag(const char* what, int64_t i) {
  return {std::string("topology/") + what, i, MessageTag::kCollective};
}

// Seconds of one way for `bytes` between a and b (half a round trip), timed
// on a; 0 elsewhere.
double one_way(Communicator& comm, int a, int b, size_t bytes, int rounds, int64_t pair) {
  const int me = comm.rank();
  if (me != a && me != b) return 0;
  ir::Tensor t(ir::DType::kF32, {static_cast<int64_t>(bytes / sizeof(float))});
  using Clock = std::chrono::steady_clock;
  Clock::time_point start;
  for (int i = 0; i <= rounds; ++i) {  // round 0 warms the path up
    if (i == 1) start = Clock::now();
    const int64_t id = pair * 1000 + i;
    if (me == a) {
      comm.send(b, probe_tag("ping", id), t);
      t = comm.recv(b, probe_tag("pong", id));
    } else {
      comm.send(a, probe_tag("pong", id), comm.recv(a, probe_tag("ping", id)));
    }
  }
  if (me != a) return 0;
  return std::chrono::duration<double>(Clock::now() - start).count() / (2.0 * rounds);
}

constexpr int kLatencyRounds = 50;  // small messages: many, for a steady figure
constexpr size_t kLatencyBytes = 64;

}  // namespace

partitioner::Topology measure_job_topology(Communicator& comm, size_t bytes, int rounds) {
  const int n = comm.size();
  if (n < 2) return partitioner::parse_topology("1", "10e9", "");
  // Rank 0 groups the ranks by host and picks the pairs to time.
  const std::vector<std::string> hosts = gather_text(comm, "topology/hosts", host_name());
  nlohmann::json layout;
  if (comm.rank() == 0) {
    std::vector<int> block_sizes;  // ranks per run of one host
    for (int r = 0; r < n; ++r)
      if (r == 0 || hosts[static_cast<size_t>(r)] != hosts[static_cast<size_t>(r - 1)])
        block_sizes.push_back(1);
      else
        ++block_sizes.back();
    const int per_host = block_sizes.front();
    bool regular = true;
    for (int b : block_sizes) regular &= b == per_host;
    const int host_count = static_cast<int>(block_sizes.size());
    layout["host_count"] = host_count;
    layout["per_host"] = regular ? per_host : 0;
    // Pairs: across hosts (0, first rank of the second run), within one (0, 1).
    nlohmann::json pairs = nlohmann::json::array();
    if (host_count > 1) pairs.push_back({0, block_sizes.front()});
    if (per_host > 1) pairs.push_back({0, 1});
    layout["pairs"] = pairs;
  }
  layout = nlohmann::json::parse(share_text(comm, "topology/layout", layout.dump()));

  // Per pair: latency from small messages, bandwidth from large ones net of it.
  std::vector<partitioner::TopologyLevel> measured;
  for (size_t i = 0; i < layout["pairs"].size(); ++i) {
    const int a = layout["pairs"][i][0], b = layout["pairs"][i][1];
    const auto id = static_cast<int64_t>(2 * i);
    const double latency = one_way(comm, a, b, kLatencyBytes, kLatencyRounds, id);
    const double big = one_way(comm, a, b, bytes, rounds, id + 1);
    const double bytes_sent = static_cast<double>(bytes / sizeof(float) * sizeof(float));
    measured.push_back({0, bytes_sent / std::max(big - latency, 1e-9), latency});
  }
  // Rank 0 is the first of every pair, so it holds every figure.
  std::string result;
  if (comm.rank() == 0) {
    const int host_count = layout["host_count"], per_host = layout["per_host"];
    const bool across = host_count > 1;
    partitioner::Topology t;
    t.levels = {measured[0]};
    if (across && per_host > 1) {
      t.levels = {measured[0], measured[1]};
      t.levels[0].count = host_count;
      t.levels[1].count = per_host;
    } else {
      // One host, one rank per host, or irregular hosts: one level at the
      // slowest link (across hosts when there are several).
      t.levels[0].count = n;
    }
    partitioner::validate(t);
    result = partitioner::to_json(t).dump();
  }
  return partitioner::topology_from_json(
      nlohmann::json::parse(share_text(comm, "topology/result", result)));
}

}  // namespace pipetrain::exec
