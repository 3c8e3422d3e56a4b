#include "executor/memory_plan.h"

#include <algorithm>

namespace pipetrain::exec {

namespace {
size_t aligned(size_t bytes) {
  return (bytes + 63) / 64 * 64;
}
}  // namespace

MemoryPlan plan_memory(const ir::Graph& g, const std::function<bool(const ir::Node&)>& is_view,
                       const std::set<std::string>& unplaced) {
  MemoryPlan plan;
  plan.order = g.topo_order();
  const size_t end = plan.order.size();
  // Producers first: each output starts as its own root.
  for (size_t pos = 0; pos < end; ++pos) {
    const ir::Node& n = g.nodes[plan.order[pos]];
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k].empty()) continue;
      TensorSlot s;
      s.first = s.last = pos;
      s.root = n.outputs[k];
      s.bytes = unplaced.count(n.outputs[k]) ? 0 : aligned(g.tensor(n.outputs[k]).nbytes());
      if (k == 0 && is_view(n) && n.has_input(0)) {
        auto in = plan.slots.find(n.inputs[0]);
        // A view of a value or a graph input needs no arena space at all.
        s.root = in == plan.slots.end() ? std::string() : in->second.root;
        s.bytes = 0;
      }
      plan.slots[n.outputs[k]] = s;
    }
  }
  // Readers extend the life of the storage they read.
  auto touch = [&](const std::string& t, size_t pos) {
    auto it = plan.slots.find(t);
    if (it == plan.slots.end()) return;
    it->second.last = std::max(it->second.last, pos);
    if (!it->second.root.empty() && it->second.root != t) {
      TensorSlot& r = plan.slots.at(it->second.root);
      r.last = std::max(r.last, pos);
    }
  };
  for (size_t pos = 0; pos < end; ++pos)
    for (const auto& in : g.nodes[plan.order[pos]].inputs)
      if (!in.empty()) touch(in, pos);
  for (const auto& out : g.outputs) touch(out, end);

  // Greedy placement, largest first: the lowest offset that overlaps no slot
  // already placed whose life overlaps this one's.
  std::vector<std::string> roots;
  for (const auto& [name, s] : plan.slots)
    if (s.root == name && s.bytes > 0) roots.push_back(name);
  std::stable_sort(roots.begin(), roots.end(), [&](const auto& a, const auto& b) {
    return plan.slots.at(a).bytes > plan.slots.at(b).bytes;
  });
  std::vector<const TensorSlot*> placed;
  for (const auto& name : roots) {
    TensorSlot& s = plan.slots.at(name);
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, offset + bytes) of overlapping lives
    for (const TensorSlot* p : placed)
      if (p->first <= s.last && s.first <= p->last)
        busy.emplace_back(p->offset, p->offset + p->bytes);
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset + s.bytes <= lo) break;
      offset = std::max(offset, hi);
    }
    s.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + s.bytes);
    placed.push_back(&s);
    plan.naive_bytes += s.bytes;
  }
  for (auto& [name, s] : plan.slots)
    if (s.root != name && !s.root.empty()) s.offset = plan.slots.at(s.root).offset;
  // The lower bound any placement must reach.
  std::vector<size_t> live(end + 1, 0);
  for (const auto& name : roots) {
    const TensorSlot& s = plan.slots.at(name);
    for (size_t p = s.first; p <= s.last; ++p) live[p] += s.bytes;
  }
  plan.peak_live_bytes = *std::max_element(live.begin(), live.end());
  return plan;
}

}  // namespace pipetrain::exec
