// libFuzzer target: a PipeDream graph.txt profile, read, validated,
// partitioned and simulated as `pipetrain partition graph.txt` does.
#include "fuzz/fuzz_input.h"
#include "partitioner/dp.h"
#include "partitioner/graph_txt.h"
#include "partitioner/profile.h"
#include "partitioner/simulator.h"
#include "partitioner/topology.h"

namespace pt = pipetrain::partitioner;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  pipetrain::fuzz::expect_clean([&] {
    pt::Profile profile = pt::read_graph_txt(text);
    pt::validate(profile);
    if (profile.layers.size() > 64) return;  // slow, not wrong
    const pt::Plan plan = pt::partition(profile, pt::parse_topology("2x2", "10e9", ""));
    pt::simulate(plan, profile, pt::ScheduleKind::kPipeDream);
  });
  return 0;
}
