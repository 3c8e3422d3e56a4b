// The table `run --profile` and `train --profile` print: time per op type,
// then the slowest nodes with their GFLOP/s.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace pipetrain::cli {

/// node_seconds: summed over `runs` runs, indexed like g.nodes.
void print_profile(const ir::Graph& g, const std::vector<double>& node_seconds, int runs);

}  // namespace pipetrain::cli
