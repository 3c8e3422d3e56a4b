// Topology: levels of workers, outermost first. "4x4 at 10e9,150e9" is 4
// servers joined at 10 GB/s, each with 4 GPUs joined at 150 GB/s. Worker ids
// run 0..N-1 with the innermost level fastest-varying (workers 0-3 share a
// server), so a contiguous range of workers crosses the fewest slow links.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipetrain::partitioner {

struct TopologyLevel {
  int count = 1;         // components of this level inside one component of the level above
  double bandwidth = 0;  // bytes/s of the links joining them
  double latency_s = 0;  // fixed cost per message on those links (measured MPI links have one)
};

struct Topology {
  std::vector<TopologyLevel> levels;  // outermost first
  double memory_bytes = 0;            // per worker; 0: no limit

  int workers() const;
  /// Bandwidth of the slowest link between any two workers in [first, first +
  /// count): the outermost level at which the first and last differ. Infinite
  /// for count <= 1.
  double slowest_link(int first, int count) const;
  /// Per-message latency of that same link; 0 for count <= 1.
  double slowest_link_latency(int first, int count) const;
  /// "4x4 @ 10 GB/s, 150 GB/s".
  std::string describe() const;
};

/// Throws PlanError: no levels, counts < 1, bandwidths not finite and > 0,
/// memory negative, more than 1<<20 workers.
void validate(const Topology& t);

/// From the CLI flags: shape "4x4" (outermost first), bandwidths "10e9,150e9"
/// (one per level, same order; one value applies to all levels), memory
/// "16e9" ("" or "0": unlimited). Throws PlanError naming the flag.
Topology parse_topology(const std::string& shape, const std::string& bandwidths,
                        const std::string& memory);
/// Sets each level's per-message latency from "20e-6,5e-6" (seconds, one per
/// level or one for all; "" leaves them). Throws PlanError naming --latency.
void set_latencies(Topology& t, const std::string& latencies);

nlohmann::json to_json(const Topology& t);
Topology topology_from_json(const nlohmann::json& j);

}  // namespace pipetrain::partitioner
