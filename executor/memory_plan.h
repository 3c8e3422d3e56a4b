// Liveness-based memory plan for one graph run: every tensor a node produces
// gets a slot in one arena, live from its producer to its last reader (graph
// outputs to the end of the run); slots of dead tensors are reused. Outputs
// that are views of their input (Reshape and friends) share the input's slot
// and extend its life.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace pipetrain::exec {

struct TensorSlot {
  size_t offset = 0;  // bytes into the arena (64-byte aligned)
  size_t bytes = 0;   // 0 for a view of another tensor
  size_t first = 0;   // position in `order` of the producer
  size_t last = 0;    // position of the last reader (order.size() for graph outputs)
  std::string root;   // the tensor whose storage this one uses (itself unless a view)
};

struct MemoryPlan {
  std::vector<size_t> order;                // node execution order
  std::map<std::string, TensorSlot> slots;  // every tensor a node produces
  size_t arena_bytes = 0;                   // the arena's size
  size_t peak_live_bytes = 0;               // max over positions of the bytes live there
  size_t naive_bytes = 0;                   // every tensor in its own buffer
};

/// `is_view(node)`: the node's output 0 is a view of its input 0 (backend-specific).
/// Tensors in `unplaced` get no room in the arena (bytes 0): the runner hands
/// their producers buffers of the caller's (gradient accumulators).
MemoryPlan plan_memory(const ir::Graph& g, const std::function<bool(const ir::Node&)>& is_view,
                       const std::set<std::string>& unplaced = {});

}  // namespace pipetrain::exec
