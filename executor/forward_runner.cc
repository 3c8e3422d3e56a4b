#include "executor/forward_runner.h"

#include "autodiff/training_graph.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <set>

#include "ir/error.h"

namespace pipetrain::exec {

uint64_t fresh_values_version() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

ForwardRunner::~ForwardRunner() = default;

void ForwardRunner::poison_arena() {
  if (plan_) std::memset(arena_.get(), 0xFF, plan_->arena_bytes);  // NaN in every float
}

ForwardRunner::ForwardRunner(const ir::Graph& graph, Backend& backend, bool plan_memory,
                             const std::set<std::string>& sink_outputs,
                             const std::set<std::string>& held_outputs)
    : graph_(graph), backend_(backend), order_(graph.topo_order()) {
  std::string problems;
  for (size_t i : order_) {
    std::string why = backend_.unsupported_reason(graph_, graph_.nodes[i]);
    if (!why.empty()) problems += "\n  " + graph_.nodes[i].describe() + ": " + why;
  }
  if (!problems.empty())
    throw UnsupportedOp("backend '" + backend_.name() + "' cannot run:" + problems);
  for (size_t pos = 0; pos < order_.size(); ++pos)
    for (const auto& in : graph_.nodes[order_[pos]].inputs)
      if (!in.empty()) last_use_[in] = pos;
  find_sink_roots();
  // Graph outputs go back to the caller as the IR shapes them.
  layout_ = plan_blocked_layout(
      graph_, backend_, std::set<std::string>(graph_.outputs.begin(), graph_.outputs.end()));
  if (plan_memory) {
    for (const auto& out : sink_outputs)
      if (accumulates_in_place(out)) unplaced_.insert(sink_roots_.at(out).tensor);
    find_held_roots(held_outputs);
    plan_ = std::make_unique<MemoryPlan>(exec::plan_memory(
        graph_, [&](const ir::Node& n) { return backend_.output_is_view(n); }, unplaced_));
    order_ = plan_->order;
    arena_ = ir::Tensor::allocate(plan_->arena_bytes);
  }
}

void ForwardRunner::find_sink_roots() {
  if (!backend_.writes_host_outputs()) return;
  std::map<std::string, int> readers, as_output;
  std::map<std::string, std::pair<size_t, size_t>> producer;  // tensor -> (node, output)
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    const ir::Node& n = graph_.nodes[i];
    for (const auto& in : n.inputs)
      if (!in.empty()) ++readers[in];
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty()) producer[n.outputs[k]] = {i, k};
  }
  for (const auto& o : graph_.outputs) ++as_output[o];
  for (const auto& [out, count] : as_output) {
    if (count != 1 || readers.count(out)) continue;  // someone reads the running sum
    // Walk back through views (Reshape of a GEMM's result) to the buffer's
    // producer; every tensor on the way must be read only by the next view.
    for (std::string t = out;;) {
      auto p = producer.find(t);
      if (p == producer.end()) break;  // a graph input or value: the runner copies it
      if (t != out && (readers[t] != 1 || as_output.count(t))) break;
      const ir::Node& n = graph_.nodes[p->second.first];
      if (!backend_.output_is_view(n)) {
        sink_roots_[out] = {t, p->second.first, p->second.second};
        break;
      }
      if (n.inputs.empty() || n.inputs[0].empty()) break;
      t = n.inputs[0];
    }
  }
}

void ForwardRunner::find_held_roots(const std::set<std::string>& held_outputs) {
  if (held_outputs.empty() || !backend_.writes_host_outputs()) return;
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < graph_.nodes.size(); ++i)
    for (const auto& o : graph_.nodes[i].outputs)
      if (!o.empty()) producer[o] = i;
  const std::set<std::string> outputs(graph_.outputs.begin(), graph_.outputs.end());
  for (const auto& out : held_outputs) {
    if (!outputs.count(out)) continue;
    // Through views (Reshape of a GEMM's result) to the node that owns the
    // storage; a view of a graph input or value has none to give.
    for (std::string t = out;;) {
      auto p = producer.find(t);
      if (p == producer.end() || layout_.tensors.count(t)) break;
      const ir::Node& n = graph_.nodes[p->second];
      if (!backend_.output_is_view(n) || n.outputs[0] != t) {
        unplaced_.insert(t);
        held_outputs_.insert(out);
        break;
      }
      if (n.inputs.empty() || n.inputs[0].empty()) break;
      t = n.inputs[0];
    }
  }
}

bool ForwardRunner::accumulates_in_place(const std::string& output) const {
  auto it = sink_roots_.find(output);
  return it != sink_roots_.end() &&
         backend_.kernel_accumulates(graph_.nodes[it->second.node], it->second.output);
}

void ForwardRunner::fold_into_sink(const std::string& name, const ir::Tensor& result,
                                   ir::Tensor& sink, bool overwrite) {
  if (overwrite) {
    std::memcpy(sink.raw(), result.raw(), sink.nbytes());
    return;
  }
  if (sink.dtype() != ir::DType::kF32)
    throw RuntimeFault("output '" + name + "': only float32 outputs can be summed into a sink");
  float* a = sink.data<float>();
  const float* x = result.data<float>();
  for (int64_t i = 0, n = sink.numel(); i < n; ++i) a[i] += x[i];
}

std::map<std::string, ir::Tensor> ForwardRunner::run(const std::map<std::string, ir::Tensor>& feeds,
                                                     const RunOptions& options) {
  std::map<std::string, ir::Tensor> live;
  for (const auto& name : graph_.inputs) {
    auto it = feeds.find(name);
    const ir::TensorDesc& d = graph_.tensor(name);
    if (it == feeds.end() && name == autodiff::kLossWeight) {
      live[name] = ir::Tensor::scalar_f32(1.0f);  // unweighted: the loss as it is
      continue;
    }
    if (it == feeds.end())
      throw ModelError("input '" + name + "' (" + ir::dtype_name(d.dtype) + " " +
                       ir::shape_str(d.shape) + ") was not given");
    if (it->second.dtype() != d.dtype || it->second.shape() != d.shape)
      throw ModelError("input '" + name + "' is " + ir::dtype_name(it->second.dtype()) + " " +
                       ir::shape_str(it->second.shape()) + " but the model expects " +
                       ir::dtype_name(d.dtype) + " " + ir::shape_str(d.shape));
    live[name] = it->second;
  }
  for (const auto& [name, t] : feeds)
    if (std::find(graph_.inputs.begin(), graph_.inputs.end(), name) == graph_.inputs.end())
      throw ModelError("'" + name + "' is not an input of the model");

  // The backend may keep tensors on its device until the run ends.
  backend_.begin_run(options.values_version);
  struct EndRun {
    Backend& b;
    ~EndRun() { b.end_run(); }
  } end_run{backend_};
  std::set<std::string> keep(graph_.outputs.begin(), graph_.outputs.end());
  // Sinks their producers write: the sink's buffer stands in for the
  // producer's output (root tensor -> sink, and whether to add into it).
  std::map<std::string, std::pair<const ir::Tensor*, bool>> bound;
  if (options.sinks)
    for (const auto& [name, sink] : *options.sinks) {
      if (!keep.count(name) || !graph_.has_tensor(name))
        throw RuntimeFault("sink '" + name + "' is not an output of the graph");
      const ir::TensorDesc& d = graph_.tensor(name);
      if (sink.dtype() != d.dtype || sink.shape() != d.shape)
        throw RuntimeFault("sink '" + name + "' is " + ir::dtype_name(sink.dtype()) + " " +
                           ir::shape_str(sink.shape()) + " but the output is " +
                           ir::dtype_name(d.dtype) + " " + ir::shape_str(d.shape));
      auto root = sink_roots_.find(name);
      if (root != sink_roots_.end() && (options.sinks_overwrite || accumulates_in_place(name)))
        bound[root->second.tensor] = {&sink, !options.sinks_overwrite};
    }
  for (size_t pos = 0; pos < order_.size(); ++pos) {
    const ir::Node& n = graph_.nodes[order_[pos]];
    KernelContext ctx;
    ctx.node = &n;
    ctx.training = options.training;
    ctx.values_version = options.values_version;
    ctx.seed = options.seed * 1000003ULL + order_[pos];
    if (!layout_.empty()) {
      ctx.blocked_inputs = layout_.inputs[order_[pos]];
      ctx.blocked_outputs = layout_.outputs[order_[pos]];
    }
    for (const auto& in : n.inputs) {
      if (in.empty()) {
        ctx.inputs.push_back(nullptr);
        ctx.input_is_value.push_back(false);
        continue;
      }
      auto it = live.find(in);
      if (it != live.end()) {
        ctx.inputs.push_back(&it->second);
        ctx.input_is_value.push_back(false);
      } else if (const ir::Tensor* v = graph_.value(in)) {
        ctx.inputs.push_back(v);
        ctx.input_is_value.push_back(true);
      } else {
        throw RuntimeFault(n.describe() + ": input '" + in + "' has no value");
      }
    }
    std::vector<ir::Tensor> outs(n.outputs.size());
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty()) {
        const ir::TensorDesc& d = graph_.tensor(n.outputs[k]);
        if (auto b = bound.find(n.outputs[k]); b != bound.end()) {
          outs[k] = b->second.first->reshaped(d.shape);
          if (b->second.second) {
            ctx.accumulate.resize(n.outputs.size());
            ctx.accumulate[k] = true;
          } else if (!backend_.kernel_fills_outputs(n)) {
            std::memset(outs[k].raw(), 0, outs[k].nbytes());
          }
        } else if (unplaced_.count(n.outputs[k])) {
          // Held past the run, or a run without the sink it was planned for.
          outs[k] = backend_.kernel_fills_outputs(n) ? ir::Tensor::uninitialized(d.dtype, d.shape)
                                                     : ir::Tensor(d.dtype, d.shape);
        } else if (plan_) {
          const TensorSlot& slot = plan_->slots.at(n.outputs[k]);
          outs[k] = ir::Tensor::view(arena_, slot.offset, d.dtype, d.shape);
          if (slot.bytes && !backend_.kernel_fills_outputs(n))
            std::memset(outs[k].raw(), 0, outs[k].nbytes());  // the kernel accumulates into it
        } else {
          outs[k] = ir::Tensor(d.dtype, d.shape);
        }
      }
    for (size_t k = 0; k < outs.size(); ++k)
      ctx.outputs.push_back(outs[k].defined() ? &outs[k] : nullptr);
    auto start = std::chrono::steady_clock::now();
    backend_.run(ctx);
    if (options.node_seconds) {
      options.node_seconds->resize(graph_.nodes.size());
      (*options.node_seconds)[order_[pos]] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty()) live[n.outputs[k]] = std::move(outs[k]);
    // Free what no later node reads.
    for (const auto& in : n.inputs) {
      if (in.empty() || keep.count(in)) continue;
      auto lu = last_use_.find(in);
      if (lu == last_use_.end() || lu->second != pos) continue;
      auto it = live.find(in);
      if (it == live.end()) continue;
      backend_.release(it->second);
      live.erase(it);
    }
  }
  std::map<std::string, ir::Tensor> result;
  for (const auto& o : graph_.outputs) {
    if (result.count(o)) continue;  // listed twice
    auto it = live.find(o);
    if (it != live.end() && held_outputs_.count(o)) {
      result[o] = it->second;  // its own buffer already
    } else if (it != live.end() && options.keep_on_device && options.keep_on_device->count(o)) {
      result[o] = backend_.keep(it->second);
    } else if (it != live.end()) {
      backend_.to_host(it->second);
      result[o] = it->second;
    } else if (const ir::Tensor* v = graph_.value(o)) {
      result[o] = *v;
    } else {
      throw RuntimeFault("graph output '" + o + "' was not computed");
    }
  }
  if (options.sinks)
    for (const auto& [name, sink_handle] : *options.sinks) {
      ir::Tensor sink = sink_handle;  // a handle: writes reach the caller's buffer
      auto root = sink_roots_.find(name);
      const bool was_bound = root != sink_roots_.end() && bound.count(root->second.tensor);
      if (!was_bound || result.at(name).raw() != sink.raw()) {
        if (was_bound && !options.sinks_overwrite)
          throw RuntimeFault("output '" + name +
                             "': its kernel did not add into the sink it was given");
        fold_into_sink(name, result.at(name), sink, options.sinks_overwrite);
      }
      result[name] = sink;
    }
  return result;
}

}  // namespace pipetrain::exec
