// Seeded inputs for runs without data (`run --random-inputs`, measured
// profiles): N(0, 1) floats, integers in {0, 1} (valid class labels and token
// ids for any model), bools false.
#pragma once

#include <random>
#include <string>

#include "ir/graph.h"

namespace pipetrain::cli {

/// ModelError naming `command` and the input for a dtype it cannot fill.
ir::Tensor random_input(const ir::TensorDesc& d, std::mt19937_64& rng, const std::string& command);

}  // namespace pipetrain::cli

namespace pipetrain::cli {

/// Seeded random feeds for every input of `g` (seed 0).
std::map<std::string, ir::Tensor> random_feeds(const ir::Graph& g, const std::string& command);

}  // namespace pipetrain::cli
