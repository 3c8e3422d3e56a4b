// One replica of one pipeline stage, as one worker runs it: its own copies of
// the stage's params and buffers, its optimizer state, runners for the
// stage's forward and backward subgraphs, the per-microbatch stash between a
// forward and its backward, and the old weight versions that microbatches in
// flight still need (weight stashing). Not thread-safe: one worker thread
// owns it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "autodiff/training_graph.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "executor/optim/optimizer.h"
#include "executor/pipeline/rank_reports.h"
#include "executor/stage_program.h"

namespace pipetrain::exec {

using TensorMap = std::map<std::string, ir::Tensor>;

struct StageForwardResult {
  TensorMap send;     // activations for later stages (owned copies)
  TensorMap results;  // training-graph outputs computed here (loss, BatchNorm statistics)
};

/// Sets g's value `name` to t: copied into the existing value when the sizes
/// match (handles to it stay valid), else a clone is added.
void put_value(ir::Graph& g, const std::string& name, const ir::Tensor& t, ir::Role role);

class StageWorker {
 public:
  /// Copies the stage's params and buffers out of tg.graph (so replicas never
  /// share storage) and takes optimizer state found there (a checkpoint).
  /// `split_backward`: run the backward as backward_input() then
  /// backward_weight() (zero-bubble schedules) instead of backward().
  /// `recompute`: keep only the forward's inputs per microbatch in flight and
  /// run the forward again (same weights, same seed) before the backward.
  /// `overlapping_rounds`: a sealed set may wait (for its allreduce) while
  /// the next round accumulates, so sealing swaps in other buffers; else the
  /// sealed set is the accumulators themselves (one set of gradient memory).
  /// `step_program`: batched weight gradients (needs split_backward): the
  /// same stage cut from the training graph at the whole minibatch's size,
  /// whose weight half backward_weight_step() runs.
  StageWorker(const StageProgram& program, const autodiff::TrainingGraph& tg, Backend& backend,
              const OptimizerConfig& optimizer, bool split_backward = false, bool recompute = false,
              bool overlapping_rounds = true, const StageProgram* step_program = nullptr);
  StageWorker(const StageWorker&) = delete;
  StageWorker& operator=(const StageWorker&) = delete;

  const StageProgram& program() const { return program_; }

  /// Forward of microbatch `mb` on weight version `version` (the number of
  /// updates applied; at most version()). `feeds` holds the stage's data
  /// inputs and the activations it receives. Keeps the stash for backward().
  StageForwardResult forward(int64_t mb, int64_t version, const TensorMap& feeds, uint64_t seed);
  /// Backward of `mb` on the weights its forward used; `feeds` holds data
  /// inputs and received gradients. Adds the param gradients into the
  /// accumulators and returns the gradients for earlier stages.
  TensorMap backward(int64_t mb, const TensorMap& feeds);
  /// Split backward, first half: the gradients for earlier stages (returned)
  /// and what the second half needs, kept with the microbatch's stash.
  TensorMap backward_input(int64_t mb, const TensorMap& feeds);
  /// Second half: the param gradients, added into the accumulators; the
  /// microbatch's stash is dropped. `feeds` holds data inputs.
  void backward_weight(int64_t mb, const TensorMap& feeds);
  /// Batched weight gradients: the second half of every microbatch whose
  /// first half has run, at once on the step program (their stashes, carries
  /// and data inputs joined along the batch axis in microbatch order), into
  /// the accumulators; their stashes are dropped. `feeds`: each such
  /// microbatch's data inputs, by microbatch.
  void backward_weight_step(const std::map<int64_t, TensorMap>& feeds);

  /// Closes the gradients accumulated since the last seal as the set of
  /// update `round` (asynchronous schedules reduce one set while the next
  /// accumulates). A round sealed twice keeps adding to its set.
  void seal_gradients(int64_t round);
  /// The sealed set of `round`, in param order (allreduce sums it in place).
  std::vector<ir::Tensor*> gradient_set(int64_t round);
  /// The gradient of `param` in the sealed set of `round` (summed in place
  /// across the stages sharing a tied param).
  ir::Tensor* sealed_gradient(int64_t round, const std::string& param);
  /// False when a gradient of the sealed set holds a NaN or an Inf (read
  /// after any allreduce brought in other replicas' gradients).
  bool gradients_finite(int64_t round) const;
  /// sum g^2 over the sealed set of `round`, params in `skip` left out.
  double sealed_sum_of_squares(int64_t round, const std::set<std::string>& skip) const;
  /// Updates the newest weights with scale x the sealed set of `round` at
  /// learning rate `lr` and drops the set. With `keep_old`, the version
  /// before the update stays available to forward() and backward().
  void step(int64_t round, double scale, double lr, bool keep_old);
  /// Post-validation (Zero Bubble's optimizer step without the barrier): step() in
  /// place before the global gradient norm is known, keeping what a redo needs, a copy
  /// of the weights and optimizer state from before it and the round's gradients.
  void provisional_step(int64_t round, double scale, double lr);
  /// Ends the provisional step: keeps it when `scale` is the scale it took, or else
  /// restores the copy and steps again at `scale` (bitwise what step() at `scale` would
  /// have done). Returns whether it stepped again.
  bool settle(double scale);
  /// The copy provisional_step() keeps (0 before the first).
  size_t before_update_bytes() const;
  /// True when a microbatch in flight was run on `version`.
  bool version_in_use(int64_t version) const;
  /// Frees old versions that neither a microbatch in flight nor a version at
  /// or above `min_future` (what later forwards will ask for) needs.
  void release_versions(int64_t min_future);

  int64_t version() const { return version_; }
  int in_flight() const { return static_cast<int>(stash_.size()); }
  int versions_alive() const { return 1 + static_cast<int>(old_versions_.size()); }
  /// Bytes of the activations currently stashed.
  size_t stash_bytes() const;
  /// The most stash_bytes() has been, recomputed activations included.
  size_t peak_stash_bytes() const { return peak_stash_bytes_; }
  /// Bytes of one weight version (the params this worker holds).
  size_t param_bytes() const;
  /// Bytes of the optimizer's state (momentum, Adam's moments).
  size_t optimizer_bytes() const;
  /// Bytes of gradients held now: the accumulators and the sealed sets not
  /// yet applied.
  size_t gradient_bytes() const;

  /// Copies params, buffers and optimizer state into g's values (in place
  /// where g has them, added otherwise).
  void write_back(ir::Graph& g) const;
  /// The same values by handle (for sending to another process).
  std::vector<StateValue> state_values() const;

 private:
  struct Stash {
    int64_t version = 0;
    TensorMap tensors;
    TensorMap carry;          // split backward: from backward_input() to backward_weight()
    bool input_done = false;  // backward_input() ran
    // Recomputation: the forward's inputs and seed; `tensors` is filled again
    // from them just before the backward.
    TensorMap inputs;
    uint64_t seed = 0;
  };
  /// Recomputation: runs the forward of `st` again to refill its stash.
  void recompute_stash(Stash& st);
  /// The stash tensors from a forward run's outputs (copies with `copy`,
  /// else views into the forward arena) and received feeds.
  TensorMap stash_tensors(const TensorMap& outs, const TensorMap& feeds, bool copy) const;
  bool recompute_ = false;
  bool overlapping_rounds_ = true;
  /// Stashed forward outputs only this worker's backward reads (not sent,
  /// not results): Backend::keep() holds them (a device backend on the
  /// device) instead of the host.
  std::set<std::string> kept_stash_;
  size_t peak_stash_bytes_ = 0;
  Stash& stash_of(int64_t mb, const char* what);
  /// Options of a run of backward subgraph `g`: training, on the current
  /// values, its param gradients summed into the accumulators (`sinks`
  /// receives them by gradient name and must outlive the run).
  RunOptions backward_run(const ir::Graph& g, TensorMap& sinks);
  /// Options of a run in training mode on the current values.
  RunOptions training_run() const;
  /// The param gradients among g's outputs.
  std::set<std::string> gradient_outputs(const ir::Graph& g) const;
  /// Gives the accumulators buffers again after a seal took them.
  void ready_accumulators();
  /// Copies of the gradients a backward output sends to earlier stages.
  TensorMap sent_gradients(const TensorMap& outs) const;
  /// The inputs of `g` from feeds and the stash of `st`.
  TensorMap backward_inputs(const ir::Graph& g, const Stash& st, const TensorMap& feeds) const;
  /// Points both subgraphs at the params of `version`.
  void use_version(int64_t version);

  StageProgram program_;  // its subgraphs hold this worker's param handles
  // Batched weight gradients: the stage at the minibatch size (split), whose
  // backward_weight holds the same param handles, and its runner.
  StageProgram step_program_;
  std::unique_ptr<ForwardRunner> step_weight_runner_;
  ir::Graph state_;                                     // params (same handles) + optimizer state
  std::map<std::string, ir::Tensor> params_, buffers_;  // newest weights, BatchNorm buffers
  std::map<std::string, std::string> buffer_of_;        // fresh statistic -> buffer
  std::map<std::string, ir::Tensor> grad_acc_;          // param -> sum of its gradients
  struct GradientSet {
    std::map<std::string, ir::Tensor> grads;
    bool empty = true;          // no microbatch added yet
    bool accumulators = false;  // the accumulators' own buffers (no overlapping rounds)
  };
  std::map<int64_t, GradientSet> sealed_;  // round -> its gradients
  // A provisional step not yet settled: its set, scale and rate.
  struct Provisional {
    GradientSet set;
    double scale = 0, lr = 0;
  };
  std::optional<Provisional> provisional_;
  std::map<std::string, ir::Tensor> before_step_;  // params and optimizer state, reused buffers
  bool acc_empty_ = true;                          // grad_acc_ holds no microbatch yet
  // Buffers of dropped gradient sets and weight versions, reused (big
  // allocations are page faults and zero fills every step otherwise).
  std::vector<std::map<std::string, ir::Tensor>> spare_grads_, spare_versions_;
  std::map<int64_t, std::map<std::string, ir::Tensor>> old_versions_;
  std::map<int64_t, Stash> stash_;  // microbatch -> what its backward reads
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ForwardRunner> forward_runner_, backward_runner_;
  std::unique_ptr<ForwardRunner> input_runner_, weight_runner_;  // split backward
  int64_t version_ = 0;
  static constexpr int64_t kNewest = -1;
  static constexpr int64_t kStale = -2;  // the subgraphs point at recycled buffers
  int64_t active_ = kNewest;             // the version the subgraphs point at (kNewest: params_)
  uint64_t values_version_ = fresh_values_version();  // renewed whenever the params change
};

}  // namespace pipetrain::exec
