// Shared by the profile fuzzers (JSON and graph.txt): what `pipetrain
// partition` does with a profile that loaded, the DP and then the simulator.
#pragma once

#include "partitioner/dp.h"
#include "partitioner/profile.h"
#include "partitioner/simulator.h"
#include "partitioner/topology.h"

namespace pipetrain::fuzz {

inline void use_profile(const partitioner::Profile& profile) {
  // A fuzzed profile of many layers would make the DP slow, not wrong.
  if (profile.layers.size() > 64) return;
  const partitioner::Plan plan =
      partitioner::partition(profile, partitioner::parse_topology("2x2", "10e9", ""));
  partitioner::simulate(plan, profile, partitioner::ScheduleKind::kPipeDream);
}

}  // namespace pipetrain::fuzz
