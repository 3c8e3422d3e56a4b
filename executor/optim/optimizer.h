// Optimizers (PyTorch 1.13's SGD, Adam, AdamW), learning-rate schedules and
// gradient clipping. Parameters and optimizer state are values of the IR
// graph, so stashing, checkpoints and stage placement treat them like any
// other tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace pipetrain::exec {

/// Hyper-parameters; doubles like PyTorch's Python floats (cast to float per element).
struct OptimizerConfig {
  std::string kind = "sgd";  // sgd | adam | adamw
  double lr = 0.01;          // the base rate; step() takes the scheduled one
  double momentum = 0;       // sgd
  double dampening = 0;      // sgd
  bool nesterov = false;     // sgd (needs momentum > 0 and dampening 0)
  double weight_decay = 0;   // sgd, adam: L2 added to the gradient; adamw: decoupled
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  bool amsgrad = false;                           // adam, adamw
};

/// Learning rate per step: a linear warm-up from 0 to base_lr over warmup_steps, then
///   constant: base_lr
///   step:     base_lr * gamma^floor(t / step_size)                (torch StepLR)
///   cosine:   min_lr + (base_lr - min_lr) * (1 + cos(pi t / T)) / 2, T = total_steps -
///             warmup_steps, and min_lr for t >= T               (torch CosineAnnealingLR)
/// with t = step - warmup_steps.
struct LrSchedule {
  std::string kind = "constant";  // constant | step | cosine
  int64_t warmup_steps = 0;
  int64_t step_size = 0;    // step
  double gamma = 0.1;       // step
  int64_t total_steps = 0;  // cosine
  double min_lr = 0;        // cosine
  /// Throws ModelError naming the bad field.
  void validate() const;
  /// The rate for 0-based optimizer step `step` (validate() first).
  double lr_at(int64_t step, double base_lr) const;
};

/// Updates parameters in place from their gradients. State lives in the graph as
/// ir::Role::kOptimizerState values named after the parameter:
///   "<param>.step" (i64 scalar, steps taken), "<param>.momentum" (sgd with momentum),
///   "<param>.exp_avg", "<param>.exp_avg_sq" and, with amsgrad, "<param>.max_exp_avg_sq".
class Optimizer {
 public:
  /// Checks the config and the params (kParam f32 values of g) and adds any missing state to
  /// g (zeros; state already present, e.g. from a checkpoint, is kept if its shape fits).
  /// Throws ModelError naming the bad field or param.
  static std::unique_ptr<Optimizer> create(const OptimizerConfig& config, ir::Graph& g,
                                           const std::vector<std::string>& params);
  virtual ~Optimizer() = default;

  /// One step with learning rate lr. A param with no entry in grads is skipped (its step
  /// count too), as torch skips a param whose .grad is None. Throws ModelError on a grad of
  /// the wrong shape or dtype, or a param or its state missing from g.
  /// With `into`, a param that has an entry there of its shape and dtype is
  /// written to that buffer instead of in place, and g's value becomes that
  /// buffer: the old one keeps the weights before the step (weight stashing
  /// without a copy). The update reads float(grad_scale) x each gradient
  /// (an average over microbatches, clipping) without writing it back.
  void step(ir::Graph& g, const std::map<std::string, ir::Tensor>& grads, double lr,
            const std::map<std::string, ir::Tensor>* into = nullptr, double grad_scale = 1.0);

  const OptimizerConfig& config() const { return config_; }
  const std::vector<std::string>& params() const { return params_; }
  /// The state values of one param, in a fixed order.
  std::vector<std::string> state_names(const std::string& param) const;

 protected:
  Optimizer(OptimizerConfig config, std::vector<std::string> params)
      : config_(std::move(config)), params_(std::move(params)) {}
  /// Updates one param (n elements) at 1-based step t from grad x grad_scale:
  /// reads p_in, writes p_out (the same buffer for an in-place update).
  virtual void update(ir::Graph& g, const std::string& param, const float* p_in, float* p_out,
                      const float* grad, float grad_scale, int64_t n, int64_t t, double lr) = 0;

  OptimizerConfig config_;
  std::vector<std::string> params_;
};

/// sum g^2 over an f32 tensor, in double, in a fixed order (eight interleaved
/// partial sums added at the end): what clip_grad_norm adds per tensor.
double sum_of_squares(const ir::Tensor& g);

/// Scales every gradient in place by min(1, max_norm / (total + 1e-6)), where total is the
/// 2-norm over all gradients (accumulated in double, in the map's name order), and returns
/// total: torch.nn.utils.clip_grad_norm_. A non-finite total leaves the gradients unchanged
/// (torch would scale by NaN) so the caller can report it.
double clip_grad_norm(std::map<std::string, ir::Tensor>& grads, double max_norm);

/// False when an f32 tensor holds a NaN or an Inf (all exponent bits set): the
/// check before an update.
bool all_finite(const ir::Tensor& t);

}  // namespace pipetrain::exec
