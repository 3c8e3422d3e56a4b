// Runs a graph forward on one backend: checks the feeds against the graph's
// inputs, allocates every output from the IR's static shapes, and frees each
// intermediate after its last use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/layout_plan.h"
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
  /// Graph outputs summed into caller-owned buffers of their dtype and size
  /// (gradient accumulators): the run adds each output into its buffer, or
  /// overwrites the buffer with `sinks_overwrite`, and returns the buffer.
  /// Where accumulates_in_place() says so the producing kernel writes the
  /// buffer itself (GEMM beta = 1): no copy, no extra pass over memory.
  const std::map<std::string, ir::Tensor>* sinks = nullptr;
  bool sinks_overwrite = false;
  /// Graph outputs the caller hands only to later runs of this backend, not
  /// the host: returned by Backend::keep() (owned, not arena views; on a
  /// device backend still on the device) instead of brought to the host.
  const std::set<std::string>* keep_on_device = nullptr;
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
  ///
  /// `sink_outputs`: graph outputs every run will sum into buffers of the
  /// caller's (RunOptions::sinks); the arena keeps no room for those whose
  /// producers write the buffers themselves (a run without the sink gets a
  /// fresh buffer for them).
  ///
  /// `held_outputs`: graph outputs the caller keeps past the next run (a
  /// pipeline stage's stash). On a backend that writes host outputs their
  /// producers write buffers of their own, not arena slots, and the run
  /// returns those buffers: no copy of what is kept (for the GPT demo's
  /// stage 0, 23 MiB per microbatch, a quarter of its forward's time).
  ForwardRunner(const ir::Graph& graph, Backend& backend, bool plan_memory = false,
                const std::set<std::string>& sink_outputs = {},
                const std::set<std::string>& held_outputs = {});
  ~ForwardRunner();

  /// Feeds must cover every graph input with its exact dtype and shape
  /// (ModelError naming the input otherwise). Returns the graph outputs.
  std::map<std::string, ir::Tensor> run(const std::map<std::string, ir::Tensor>& feeds,
                                        const RunOptions& options = {});

  /// True when a sink for graph output `output` is written by its producing
  /// kernel, also when adding (else the runner adds the result in after the
  /// kernels ran: one more pass over the buffer).
  bool accumulates_in_place(const std::string& output) const;

 private:
  const ir::Graph& graph_;
  Backend& backend_;
  std::vector<size_t> order_;
  std::map<std::string, size_t> last_use_;  // tensor -> position in order_ of its last reader
  /// Graph output -> the tensor whose buffer it is (itself, or the input of
  /// the views that lead to it) when nothing else reads that buffer, so a
  /// sink may stand in for it; with the producer's node and output index.
  struct SinkRoot {
    std::string tensor;
    size_t node = 0, output = 0;
  };
  std::map<std::string, SinkRoot> sink_roots_;
  std::set<std::string> unplaced_;      // sink and held roots left out of the arena
  std::set<std::string> held_outputs_;  // graph outputs in buffers of their own
  void find_sink_roots();
  void find_held_roots(const std::set<std::string>& held_outputs);
  /// Adds (or copies, with `overwrite`) `result` into `sink`, checking they match.
  static void fold_into_sink(const std::string& name, const ir::Tensor& result, ir::Tensor& sink,
                             bool overwrite);
  LayoutPlan layout_;                 // tensors stored blocked
  std::unique_ptr<MemoryPlan> plan_;  // null without plan_memory
  std::shared_ptr<std::byte[]> arena_;

 public:
  /// Fills the arena with NaN bytes: tests use it to catch a kernel that
  /// reads an output it did not write.
  void poison_arena();
  /// The memory plan (null when constructed without plan_memory).
  const MemoryPlan* memory_plan() const { return plan_.get(); }
  /// The intermediate tensors stored in the backend's blocked layout (layout_access()).
  const LayoutPlan& layout_plan() const { return layout_; }
};

}  // namespace pipetrain::exec
