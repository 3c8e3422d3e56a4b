// A measured profile of a training graph on the CPU backend: every node of a
// training step (forward, loss, backward) timed over a few steps on random
// inputs. Shared by `pipetrain profile --device measured` and the
// pipelined `pipetrain train`, which partitions and predicts from it.
#pragma once

#include <string>

#include "autodiff/training_graph.h"
#include "partitioner/profile.h"

namespace pipetrain::cli {

/// `command` names the caller in errors about inputs it cannot fill.
partitioner::Profile measure_training_profile(const autodiff::TrainingGraph& tg, int warmup,
                                              int runs, const std::string& command);

}  // namespace pipetrain::cli
