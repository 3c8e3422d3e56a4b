#include "executor/pipeline/stage_worker.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "executor/pipeline/whole_minibatch.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

/// The inputs `g` takes, picked from `from` (a missing one is left out, so
/// the runner names it).
TensorMap select_inputs(const ir::Graph& g, const TensorMap& from) {
  TensorMap out;
  for (const auto& in : g.inputs) {
    auto it = from.find(in);
    if (it != from.end()) out[in] = it->second;
  }
  return out;
}

/// acc = g (first) or acc += g.
void accumulate(ir::Tensor& acc, const ir::Tensor& g, bool first) {
  float* a = acc.data<float>();
  const float* x = g.data<float>();
  if (first)
    std::memcpy(a, x, acc.nbytes());
  else
    for (int64_t i = 0, n = acc.numel(); i < n; ++i) a[i] += x[i];
}

/// The last of `spares` (recycled buffers by name), or an empty map.
std::map<std::string, ir::Tensor> take_spare(
    std::vector<std::map<std::string, ir::Tensor>>& spares) {
  if (spares.empty()) return {};
  auto out = std::move(spares.back());
  spares.pop_back();
  return out;
}

/// A copy of `src` in `reuse`'s buffer when it has one of the right size
/// (no allocation, no page faults), else a fresh one.
ir::Tensor copy_into(const ir::Tensor& src, ir::Tensor* reuse) {
  if (reuse && reuse->defined() && reuse->nbytes() == src.nbytes()) {
    std::memcpy(reuse->raw(), src.raw(), src.nbytes());
    return *reuse;
  }
  return src.clone();
}

}  // namespace

StageWorker::StageWorker(const StageProgram& program, const autodiff::TrainingGraph& tg,
                         Backend& backend, const OptimizerConfig& optimizer, bool split_backward,
                         bool recompute, bool overlapping_rounds, const StageProgram* step_program)
    : recompute_(recompute), overlapping_rounds_(overlapping_rounds), program_(program) {
  if (split_backward) exec::split_backward(program_);
  if (step_program) {
    if (!split_backward || recompute)
      throw PlanError("stage " + std::to_string(program_.stage) +
                      ": batched weight gradients need the split backward, without recomputation");
    step_program_ = *step_program;
    exec::split_backward(step_program_);
    check_batched_weights(program_, step_program_);
    // Only its weight half runs; the rest would hold the step graph's params.
    step_program_.forward = step_program_.backward = step_program_.backward_input = ir::Graph();
  }
  std::map<std::string, std::string> buffer_for;
  for (const auto& [fresh, buffer] : tg.buffer_updates) buffer_for[fresh] = buffer;
  for (const auto& r : program_.results)
    if (auto it = buffer_for.find(r); it != buffer_for.end()) buffer_of_[r] = it->second;

  // Private copies of params and buffers, swapped into both subgraphs.
  auto own = [&](const std::string& name, ir::Role role, std::map<std::string, ir::Tensor>& into) {
    const ir::Tensor* v = tg.graph.value(name);
    if (!v)
      throw ModelError("stage " + std::to_string(program_.stage) + ": '" + name +
                       "' has no value in the training graph");
    ir::Tensor copy = v->clone();
    into[name] = copy;
    for (ir::Graph* g : {&program_.forward, &program_.backward, &program_.backward_input,
                         &program_.backward_weight, &step_program_.backward_weight})
      if (g->has_value(name)) g->set_value(name, copy, role);
  };
  for (const auto& p : program_.params) {
    own(p, ir::Role::kParam, params_);
    state_.set_value(p, params_.at(p), ir::Role::kParam);
    if (program_.grads.count(p)) {
      const ir::Tensor& w = params_.at(p);
      grad_acc_[p] = ir::Tensor(w.dtype(), w.shape());
    }
  }
  for (const auto& [fresh, buffer] : buffer_of_) own(buffer, ir::Role::kBuffer, buffers_);

  // Optimizer state a checkpoint put into the training graph is carried over.
  std::vector<std::string> trained;
  for (const auto& [p, g] : program_.grads) trained.push_back(p);
  for (const auto& [name, value] : tg.graph.values())
    if (tg.graph.tensor(name).role == ir::Role::kOptimizerState)
      for (const auto& p : trained)
        if (name.rfind(p + ".", 0) == 0)
          state_.set_value(name, value.clone(), ir::Role::kOptimizerState);
  // A stage of parameter-free layers (a lone Relu) has nothing to update.
  if (!trained.empty()) optimizer_ = Optimizer::create(optimizer, state_, trained);

  std::set<std::string> host_read;
  for (const auto& tr : program_.send_fwd) host_read.insert(tr.tensor);
  host_read.insert(program_.results.begin(), program_.results.end());
  const auto& fwd_out = program_.forward.outputs;
  for (const auto& name : program_.stash)
    if (!host_read.count(name) && std::find(fwd_out.begin(), fwd_out.end(), name) != fwd_out.end())
      kept_stash_.insert(name);

  // The param gradients are summed into the accumulators (RunOptions::sinks).
  // The stash is written where it is kept, not copied there after each forward.
  forward_runner_ =
      std::make_unique<ForwardRunner>(program_.forward, backend, true, std::set<std::string>{},
                                      recompute_ ? std::set<std::string>{} : kept_stash_);
  if (split_backward) {
    input_runner_ = std::make_unique<ForwardRunner>(program_.backward_input, backend, true);
    weight_runner_ = std::make_unique<ForwardRunner>(program_.backward_weight, backend, true,
                                                     gradient_outputs(program_.backward_weight));
    if (step_program)
      step_weight_runner_ =
          std::make_unique<ForwardRunner>(step_program_.backward_weight, backend, true,
                                          gradient_outputs(step_program_.backward_weight));
  } else {
    backward_runner_ = std::make_unique<ForwardRunner>(program_.backward, backend, true,
                                                       gradient_outputs(program_.backward));
  }
}

void StageWorker::use_version(int64_t version) {
  const int64_t target = version == version_ ? kNewest : version;
  if (target == active_) return;
  const auto& set = target == kNewest ? params_ : old_versions_.at(version);
  for (const auto& [name, t] : set)
    for (ir::Graph* g : {&program_.forward, &program_.backward, &program_.backward_input,
                         &program_.backward_weight, &step_program_.backward_weight})
      if (g->has_value(name)) g->set_value(name, t, ir::Role::kParam);
  active_ = target;
  values_version_ = fresh_values_version();  // other buffers now: kernels drop cached weights
}

StageForwardResult StageWorker::forward(int64_t mb, int64_t version, const TensorMap& feeds,
                                        uint64_t seed) {
  if (version > version_ || (version < version_ && !old_versions_.count(version)))
    throw RuntimeFault("stage " + std::to_string(program_.stage) + ": microbatch " +
                       std::to_string(mb) + " needs weight version " + std::to_string(version) +
                       ", which this worker does not hold (newest " + std::to_string(version_) +
                       ")");
  if (stash_.count(mb))
    throw RuntimeFault("stage " + std::to_string(program_.stage) + ": microbatch " +
                       std::to_string(mb) + " ran forward twice");
  use_version(version);
  RunOptions run;
  run.training = true;
  run.seed = seed;
  run.values_version = values_version_;
  if (!recompute_) run.keep_on_device = &kept_stash_;
  TensorMap outs = forward_runner_->run(select_inputs(program_.forward, feeds), run);

  // Outputs are views into the runner's arena: keep copies.
  TensorMap owned;
  auto keep = [&](const std::string& name) -> ir::Tensor& {
    auto it = owned.find(name);
    if (it == owned.end()) it = owned.emplace(name, outs.at(name).clone()).first;
    return it->second;
  };
  StageForwardResult r;
  for (const auto& tr : program_.send_fwd) r.send[tr.tensor] = keep(tr.tensor);
  for (const auto& name : program_.results) r.results[name] = keep(name);
  Stash& st = stash_[mb];
  st.version = version;
  if (recompute_) {
    st.inputs = select_inputs(program_.forward, feeds);
    st.seed = seed;
  } else {
    for (const auto& name : program_.stash) {
      if (kept_stash_.count(name))
        st.tensors[name] = outs.at(name);  // Backend::keep()'s own handle
      else if (outs.count(name))
        st.tensors[name] = keep(name);  // shared with what is sent, when it is both
      else if (auto it = feeds.find(name); it != feeds.end())
        st.tensors[name] = it->second;  // received: already this worker's
      else
        throw RuntimeFault("stage " + std::to_string(program_.stage) + ": stash tensor '" + name +
                           "' was neither computed nor received");
    }
  }
  peak_stash_bytes_ = std::max(peak_stash_bytes_, stash_bytes());
  // BatchNorm running statistics: the newest buffers follow every microbatch.
  for (const auto& [fresh, buffer] : buffer_of_) {
    const ir::Tensor& src = r.results.at(fresh);
    std::memcpy(buffers_.at(buffer).raw(), src.raw(), src.nbytes());
  }
  return r;
}

TensorMap StageWorker::stash_tensors(const TensorMap& outs, const TensorMap& feeds,
                                     bool copy) const {
  TensorMap kept;
  for (const auto& name : program_.stash) {
    if (auto it = outs.find(name); it != outs.end())
      kept[name] = copy ? it->second.clone() : it->second;  // a view into the forward arena
    else if (auto in = feeds.find(name); in != feeds.end())
      kept[name] = in->second;  // received: already this worker's
    else
      throw RuntimeFault("stage " + std::to_string(program_.stage) + ": stash tensor '" + name +
                         "' was neither computed nor received");
  }
  return kept;
}

void StageWorker::recompute_stash(Stash& st) {
  if (!recompute_ || !st.tensors.empty() || program_.stash.empty()) return;
  RunOptions run;
  run.training = true;
  run.seed = st.seed;  // the same dropout masks
  run.values_version = values_version_;
  // The results (loss, BatchNorm statistics) were taken the first time.
  // The backward follows at once, before this worker runs another forward:
  // views into the forward arena do, unless a split backward keeps them
  // until its weight half.
  st.tensors = stash_tensors(forward_runner_->run(st.inputs, run), st.inputs,
                             /*copy=*/input_runner_ != nullptr);
  st.inputs.clear();  // the received ones live on in `tensors` (the same buffers)
  peak_stash_bytes_ = std::max(peak_stash_bytes_, stash_bytes());
}

TensorMap StageWorker::sent_gradients(const TensorMap& outs) const {
  TensorMap send;  // copies: the outputs are views into the backward arena
  for (const auto& tr : program_.send_bwd)
    if (!send.count(tr.tensor)) send[tr.tensor] = outs.at(tr.tensor).clone();
  return send;
}

StageWorker::Stash& StageWorker::stash_of(int64_t mb, const char* what) {
  auto it = stash_.find(mb);
  if (it == stash_.end())
    throw RuntimeFault("stage " + std::to_string(program_.stage) + ": " + what + " of microbatch " +
                       std::to_string(mb) + " before its forward");
  return it->second;
}

TensorMap StageWorker::backward_inputs(const ir::Graph& g, const Stash& st,
                                       const TensorMap& feeds) const {
  TensorMap in = select_inputs(g, feeds);
  for (const TensorMap* kept : {&st.tensors, &st.carry})
    for (const auto& [name, t] : *kept)
      if (std::find(g.inputs.begin(), g.inputs.end(), name) != g.inputs.end()) in[name] = t;
  return in;
}

void StageWorker::ready_accumulators() {
  if (grad_acc_.empty() || grad_acc_.begin()->second.defined()) return;
  // Sealed away with overlapping rounds: replaced now rather than at the
  // seal, so the set an update has released meanwhile is reused.
  std::map<std::string, ir::Tensor> spare = take_spare(spare_grads_);
  for (auto& [param, acc] : grad_acc_) {
    const ir::Tensor& w = params_.at(param);
    auto sp = spare.find(param);
    acc = sp != spare.end() ? sp->second : ir::Tensor(w.dtype(), w.shape());
  }
}

std::set<std::string> StageWorker::gradient_outputs(const ir::Graph& g) const {
  std::set<std::string> out;
  for (const auto& [param, grad] : program_.grads)
    if (std::find(g.outputs.begin(), g.outputs.end(), grad) != g.outputs.end()) out.insert(grad);
  return out;
}

RunOptions StageWorker::training_run() const {
  RunOptions run;
  run.training = true;
  run.values_version = values_version_;
  return run;
}

RunOptions StageWorker::backward_run(const ir::Graph& g, TensorMap& sinks) {
  ready_accumulators();
  RunOptions run = training_run();
  // The param gradients go straight into the accumulators (GEMMs add with
  // beta = 1): no copy and add per microbatch.
  const std::set<std::string> outputs = gradient_outputs(g);
  for (const auto& [param, acc] : grad_acc_)
    if (outputs.count(program_.grads.at(param))) sinks[program_.grads.at(param)] = acc;
  run.sinks = &sinks;
  run.sinks_overwrite = acc_empty_;
  return run;
}

TensorMap StageWorker::backward(int64_t mb, const TensorMap& feeds) {
  Stash& st = stash_of(mb, "backward");
  use_version(st.version);
  recompute_stash(st);
  TensorMap in = backward_inputs(program_.backward, st, feeds);
  TensorMap sinks;
  TensorMap outs = backward_runner_->run(in, backward_run(program_.backward, sinks));
  acc_empty_ = false;
  stash_.erase(mb);
  return sent_gradients(outs);
}

TensorMap StageWorker::backward_input(int64_t mb, const TensorMap& feeds) {
  Stash& st = stash_of(mb, "backward");
  use_version(st.version);
  recompute_stash(st);
  TensorMap outs =
      input_runner_->run(backward_inputs(program_.backward_input, st, feeds), training_run());
  for (const auto& name : program_.carry) st.carry[name] = outs.at(name).clone();
  // Received gradients the weight half reads too (dW = X^T dY): kept by handle.
  const auto& w_inputs = program_.backward_weight.inputs;
  auto w_reads = [&](const std::string& t) {
    return std::find(w_inputs.begin(), w_inputs.end(), t) != w_inputs.end();
  };
  for (const auto& tr : program_.recv_bwd)
    if (w_reads(tr.tensor)) st.carry[tr.tensor] = feeds.at(tr.tensor);
  // What only the input half read is freed now (the weight half may run
  // much later: zero-bubble's bubbles, the step's end when batched).
  if (!recompute_)
    for (auto it = st.tensors.begin(); it != st.tensors.end();)
      it = w_reads(it->first) ? std::next(it) : st.tensors.erase(it);
  st.input_done = true;
  return sent_gradients(outs);
}

void StageWorker::backward_weight(int64_t mb, const TensorMap& feeds) {
  Stash& st = stash_of(mb, "weight gradient");
  use_version(st.version);
  TensorMap in = backward_inputs(program_.backward_weight, st, feeds);
  TensorMap sinks;
  weight_runner_->run(in, backward_run(program_.backward_weight, sinks));
  // Gradients the input half computed were carried here: added by hand.
  for (auto& [param, acc] : grad_acc_) {
    const std::string& g = program_.grads.at(param);
    if (!sinks.count(g)) accumulate(acc, st.carry.at(g), acc_empty_);
  }
  acc_empty_ = false;
  stash_.erase(mb);
}

void StageWorker::backward_weight_step(const std::map<int64_t, TensorMap>& feeds) {
  if (!step_weight_runner_)
    throw RuntimeFault("stage " + std::to_string(program_.stage) +
                       ": batched weight gradients without a step program");
  std::vector<int64_t> mbs;
  std::vector<TensorMap> parts;
  for (auto& [mb, st] : stash_) {
    if (!st.input_done) continue;
    if (!mbs.empty() && st.version != stash_.at(mbs.front()).version)
      throw RuntimeFault("stage " + std::to_string(program_.stage) +
                         ": batched weight gradients over microbatches of different weight "
                         "versions");
    auto f = feeds.find(mb);
    if (f == feeds.end())
      throw RuntimeFault("stage " + std::to_string(program_.stage) +
                         ": no data inputs for "
                         "microbatch " +
                         std::to_string(mb) + "'s weight gradient");
    mbs.push_back(mb);
    parts.push_back(backward_inputs(program_.backward_weight, st, f->second));
  }
  if (mbs.empty()) return;
  use_version(stash_.at(mbs.front()).version);
  const ir::Graph& g = step_program_.backward_weight;
  const bool first = acc_empty_;
  TensorMap sinks;
  RunOptions run = backward_run(g, sinks);
  // The step program's products run at m microbatches' rows: as many as
  // the minibatch it was cut for (check_batched_weights saw the factor).
  step_weight_runner_->run(join_microbatches(parts, g), run);
  // Gradients the input halves computed were carried: added by hand.
  for (auto& [param, acc] : grad_acc_) {
    const std::string& grad = program_.grads.at(param);
    if (sinks.count(grad)) continue;
    for (size_t i = 0; i < mbs.size(); ++i)
      accumulate(acc, stash_.at(mbs[i]).carry.at(grad), first && i == 0);
  }
  acc_empty_ = false;
  for (int64_t mb : mbs) stash_.erase(mb);
}

void StageWorker::seal_gradients(int64_t round) {
  auto [it, fresh] = sealed_.try_emplace(round);
  GradientSet& set = it->second;
  if (fresh) {
    ready_accumulators();
    set.empty = acc_empty_;
    if (!overlapping_rounds_) {
      // Updated before the next backward: the set is the accumulators
      // (handles to the same buffers), which the next microbatch overwrites.
      for (auto& [param, acc] : grad_acc_) set.grads[param] = acc;
      set.accumulators = true;
    } else {
      // The set takes the accumulators; the next microbatch overwrites
      // recycled buffers (or fresh ones: backward_run), so nothing is zeroed.
      for (auto& [param, acc] : grad_acc_) set.grads[param] = std::exchange(acc, ir::Tensor());
    }
  } else if (!acc_empty_) {
    for (auto& [param, acc] : grad_acc_) accumulate(set.grads.at(param), acc, set.empty);
    set.empty = false;
  }
  if (set.empty)  // no microbatch of this round ran here (a replica with none): zeros
    for (auto& [param, g] : set.grads) std::memset(g.raw(), 0, g.nbytes());
  set.empty = false;
  acc_empty_ = true;
}

std::vector<ir::Tensor*> StageWorker::gradient_set(int64_t round) {
  std::vector<ir::Tensor*> out;
  for (auto& [param, g] : sealed_.at(round).grads) out.push_back(&g);
  return out;
}

ir::Tensor* StageWorker::sealed_gradient(int64_t round, const std::string& param) {
  return &sealed_.at(round).grads.at(param);
}

bool StageWorker::gradients_finite(int64_t round) const {
  for (const auto& [param, t] : sealed_.at(round).grads)
    if (!all_finite(t)) return false;
  return true;
}

double StageWorker::sealed_sum_of_squares(int64_t round, const std::set<std::string>& skip) const {
  double sum = 0;
  for (const auto& [param, t] : sealed_.at(round).grads)
    if (!skip.count(param)) sum += sum_of_squares(t);
  return sum;
}

bool StageWorker::version_in_use(int64_t version) const {
  for (const auto& [mb, st] : stash_)
    if (st.version == version) return true;
  return false;
}

void StageWorker::step(int64_t round, double scale, double lr, bool keep_old) {
  auto set = sealed_.find(round);
  if (set == sealed_.end())
    throw RuntimeFault("stage " + std::to_string(program_.stage) + ": update " +
                       std::to_string(round) + " has no gradients");
  // Keeping the version this step replaces: the optimizer writes the new
  // weights into other buffers (recycled ones when there are) and the
  // current buffers become the old version, so nothing is copied.
  std::map<std::string, ir::Tensor> fresh;
  if (keep_old) {
    fresh = take_spare(spare_versions_);
    for (const auto& [name, t] : params_) {
      auto sp = fresh.find(name);
      const bool fits = sp != fresh.end() && sp->second.nbytes() == t.nbytes();
      if (!set->second.grads.count(name) || !optimizer_)
        fresh[name] = copy_into(t, fits ? &sp->second : nullptr);  // not updated: a copy
      else if (!fits)
        fresh[name] = ir::Tensor(t.dtype(), t.shape());
    }
  }
  // Without a version to keep, the optimizer updates the newest buffers in
  // place (state_ and the subgraphs share them). The scale is applied as it
  // reads each gradient (no pass of its own).
  if (optimizer_)
    optimizer_->step(state_, set->second.grads, lr, keep_old ? &fresh : nullptr, scale);
  if (keep_old) {
    old_versions_[version_] = params_;
    params_ = std::move(fresh);
    if (active_ == kNewest) active_ = version_;  // the subgraphs hold what is now the old version
  }
  if (!set->second.accumulators) spare_grads_.push_back(std::move(set->second.grads));
  sealed_.erase(set);
  ++version_;
  values_version_ = fresh_values_version();
}

void StageWorker::provisional_step(int64_t round, double scale, double lr) {
  auto set = sealed_.find(round);
  if (set == sealed_.end())
    throw RuntimeFault("stage " + std::to_string(program_.stage) + ": update " +
                       std::to_string(round) + " has no gradients");
  if (provisional_)
    throw RuntimeFault("stage " + std::to_string(program_.stage) +
                       ": a provisional update before the last one was settled");
  for (const auto& [name, t] : state_.values())
    if (const ir::Role role = state_.tensor(name).role;
        role == ir::Role::kParam || role == ir::Role::kOptimizerState)
      before_step_[name] = copy_into(t, &before_step_[name]);
  if (optimizer_) optimizer_->step(state_, set->second.grads, lr, nullptr, scale);
  provisional_ = Provisional{std::move(set->second), scale, lr};
  sealed_.erase(set);
  ++version_;
  values_version_ = fresh_values_version();
}

bool StageWorker::settle(double scale) {
  if (!provisional_) return false;
  const bool redo = scale != provisional_->scale;
  if (redo && optimizer_) {
    // Back into the same buffers: the subgraphs and state_ keep their handles.
    for (const auto& [name, t] : state_.values()) {
      auto kept = before_step_.find(name);
      ir::Tensor live = t;  // a handle on the same buffer
      if (kept != before_step_.end()) copy_into(kept->second, &live);
    }
    optimizer_->step(state_, provisional_->set.grads, provisional_->lr, nullptr, scale);
    values_version_ = fresh_values_version();
  }
  if (!provisional_->set.accumulators) spare_grads_.push_back(std::move(provisional_->set.grads));
  provisional_.reset();
  return redo;
}

size_t StageWorker::before_update_bytes() const {
  size_t bytes = 0;
  for (const auto& [name, t] : before_step_) bytes += t.nbytes();
  return bytes;
}

void StageWorker::release_versions(int64_t min_future) {
  for (auto it = old_versions_.begin(); it != old_versions_.end();) {
    const int64_t v = it->first;
    if (v >= min_future || version_in_use(v)) {
      ++it;
      continue;
    }
    if (active_ == v) active_ = kStale;  // its buffers are about to hold another version
    spare_versions_.push_back(std::move(it->second));
    it = old_versions_.erase(it);
  }
}

size_t StageWorker::stash_bytes() const {
  size_t bytes = 0;
  for (const auto& [mb, st] : stash_)
    for (const TensorMap* kept : {&st.tensors, &st.carry, &st.inputs})
      for (const auto& [name, t] : *kept) bytes += t.nbytes();
  return bytes;
}

size_t StageWorker::param_bytes() const {
  size_t bytes = 0;
  for (const auto& [name, t] : params_) bytes += t.nbytes();
  return bytes;
}

size_t StageWorker::optimizer_bytes() const {
  size_t bytes = 0;
  for (const auto& [name, t] : state_.values())
    if (state_.tensor(name).role == ir::Role::kOptimizerState) bytes += t.nbytes();
  return bytes;
}

size_t StageWorker::gradient_bytes() const {
  size_t bytes = 0;
  for (const auto& [param, g] : grad_acc_)
    if (g.defined()) bytes += g.nbytes();
  for (const auto& [round, set] : sealed_)
    if (!set.accumulators)
      for (const auto& [param, g] : set.grads) bytes += g.nbytes();
  return bytes;
}

void put_value(ir::Graph& g, const std::string& name, const ir::Tensor& t, ir::Role role) {
  if (ir::Tensor* dst = g.mutable_value(name); dst && dst->nbytes() == t.nbytes())
    std::memcpy(dst->raw(), t.raw(), t.nbytes());
  else
    g.set_value(name, t.clone(), role);
}

std::vector<StateValue> StageWorker::state_values() const {
  std::vector<StateValue> out;
  for (const auto& [name, t] : params_) out.push_back({name, ir::Role::kParam, t});
  for (const auto& [name, t] : buffers_) out.push_back({name, ir::Role::kBuffer, t});
  for (const auto& [name, t] : state_.values())
    if (state_.tensor(name).role == ir::Role::kOptimizerState)
      out.push_back({name, ir::Role::kOptimizerState, t});
  return out;
}

void StageWorker::write_back(ir::Graph& g) const {
  for (const auto& v : state_values()) put_value(g, v.name, v.value, v.role);
}

}  // namespace pipetrain::exec
