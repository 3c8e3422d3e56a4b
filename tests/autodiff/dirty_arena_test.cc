// Every case of the gradient table (forward and backward of every
// differentiable op) run through the planned runner on a NaN-poisoned arena
// gives bitwise the results of fresh zeroed buffers: no kernel the backend
// lists as filling its outputs reads or leaves an element it did not write.
#include <cstring>

#include "tests/autodiff/grad_cases.h"

namespace pipetrain::test {
namespace {

bool same_bits(const ir::Tensor& a, const ir::Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(DirtyArena, PlannedRunsIgnoreWhatTheArenaHeld) {
  auto backend = exec::make_cpu_backend();
  for (const GradCase& c : all_cases()) {
    const uint64_t seed = std::hash<std::string>{}(c.name) % 100000;
    CaseGraphs cg = build_case(c, seed);
    exec::RunOptions opts;
    opts.training = c.training;
    opts.seed = seed;
    auto fresh = exec::ForwardRunner(cg.training, *backend).run({}, opts);
    exec::ForwardRunner planned(cg.training, *backend, /*plan_memory=*/true);
    planned.poison_arena();
    auto outs = planned.run({}, opts);
    for (const auto& [name, t] : fresh)
      EXPECT_TRUE(same_bits(outs.at(name), t)) << c.name << ": output " << name << " differs";
  }
}

}  // namespace
}  // namespace pipetrain::test
