// Runs a graph forward on one backend: checks the feeds against the graph's
// inputs, allocates every output from the IR's static shapes, and frees each
// intermediate after its last use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/memory_plan.h"
#include "ir/graph.h"

namespace pipetrain::exec {

struct RunOptions {
  bool training = false;  // Dropout's default mode when it has no training_mode input
  uint64_t seed = 0;      // base seed for random ops; each node mixes in its index
  /// Whoever changes graph values in place (an optimizer step, a finite-difference
  /// probe) bumps this, so kernels drop what they derived from the old values.
  /// 0 (the default) promises nothing: kernels cache nothing derived from values.
  uint64_t values_version = 0;
  /// When set, receives each node's wall time in seconds, indexed like graph.nodes.
  std::vector<double>* node_seconds = nullptr;
};

/// A values_version no run has used before (process-wide, never 0). Kernels
/// cache what they derive from a value by its address and version, and
/// several runners may read the same buffers (a trainer and an evaluation
/// share the model's params), so whoever changed values in place takes a
/// fresh one rather than counting on its own.
uint64_t fresh_values_version();

class ForwardRunner {
 public:
  /// Throws UnsupportedOp listing every node the backend cannot run. With
  /// `plan_memory`, every intermediate lives in one arena laid out by
  /// plan_memory() and the returned outputs are views into it, valid until
  /// the next run(); otherwise each tensor is its own allocation.
  ForwardRunner(const ir::Graph& graph, Backend& backend, bool plan_memory = false);
  ~ForwardRunner();

  /// Feeds must cover every graph input with its exact dtype and shape
  /// (ModelError naming the input otherwise). Returns the graph outputs.
  std::map<std::string, ir::Tensor> run(const std::map<std::string, ir::Tensor>& feeds,
                                        const RunOptions& options = {});

 private:
  const ir::Graph& graph_;
  Backend& backend_;
  std::vector<size_t> order_;
  std::map<std::string, size_t> last_use_;  // tensor -> position in order_ of its last reader
  std::unique_ptr<MemoryPlan> plan_;        // null without plan_memory
  std::shared_ptr<std::byte[]> arena_;

 public:
  /// Fills the arena with NaN bytes: tests use it to catch a kernel that
  /// reads an output it did not write.
  void poison_arena();
  /// The memory plan (null when constructed without plan_memory).
  const MemoryPlan* memory_plan() const { return plan_.get(); }
};

}  // namespace pipetrain::exec
