// libFuzzer target: the JSON files a user hands the CLI. The first byte picks
// the kind (plan, profile, topology); the rest is the file. What loads is then
// used as the CLI would: a plan validated and printed, a profile partitioned
// and its plan simulated, a topology validated and described.
#include "fuzz/fuzz_input.h"
#include "fuzz/use_profile.h"
#include "partitioner/json_util.h"
#include "partitioner/plan.h"

namespace pt = pipetrain::partitioner;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int kind = data[0] % 3;
  const std::string path = pipetrain::fuzz::input_file(data + 1, size - 1, "input.json");
  pipetrain::fuzz::expect_clean([&] {
    if (kind == 0) {
      const pt::Plan plan = pt::load_plan(path);
      pt::validate(plan, plan.topology);
      pt::format_plan(plan);
    } else if (kind == 1) {
      pipetrain::fuzz::use_profile(pt::load_profile(path));
    } else {
      const pt::Topology t =
          pt::topology_from_json(pt::json_util::parse(pt::read_text_file(path), path));
      t.describe();
    }
  });
  return 0;
}
