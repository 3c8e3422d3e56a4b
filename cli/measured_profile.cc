#include "cli/measured_profile.h"

#include <random>

#include "cli/random_inputs.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "partitioner/profile_ir.h"

namespace pipetrain::cli {

partitioner::Profile measure_training_profile(const autodiff::TrainingGraph& tg, int warmup,
                                              int runs, const std::string& command) {
  auto backend = exec::make_cpu_backend();
  // One training step per run: backward nodes sit in their forward node's layer.
  exec::ForwardRunner runner(tg.graph, *backend, /*plan_memory=*/true);
  std::mt19937_64 rng(0);
  std::map<std::string, ir::Tensor> feeds;  // random inputs and labels (class ids 0, 1)
  for (const auto& in : tg.graph.inputs)
    feeds[in] = random_input(tg.graph.tensor(in), rng, command);
  return partitioner::measured_profile(
      tg.graph,
      [&](std::vector<double>& node_seconds) {
        exec::RunOptions o;
        o.training = true;
        o.node_seconds = &node_seconds;
        runner.run(feeds, o);
      },
      warmup, runs, backend->name());
}

}  // namespace pipetrain::cli
