#include "executor/measured_profile.h"

#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "partitioner/profile_ir.h"

namespace pipetrain::exec {

partitioner::Profile measure_training_profile(const autodiff::TrainingGraph& tg,
                                              const std::map<std::string, ir::Tensor>& feeds,
                                              int warmup, int runs) {
  auto backend = make_cpu_backend();
  // One training step per run: backward nodes sit in their forward node's layer.
  ForwardRunner runner(tg.graph, *backend, /*plan_memory=*/true);
  return partitioner::measured_profile(
      tg.graph,
      [&](std::vector<double>& node_seconds) {
        RunOptions o;
        o.training = true;
        o.node_seconds = &node_seconds;
        runner.run(feeds, o);
      },
      warmup, runs, backend->name());
}

}  // namespace pipetrain::exec
