#include "executor/trainer.h"

#include <cmath>
#include <cstring>

#include "ir/error.h"

namespace pipetrain::exec {

Trainer::Trainer(autodiff::TrainingGraph& tg, Backend& backend, TrainerOptions options)
    : tg_(tg), options_(std::move(options)), runner_(tg.graph, backend, /*plan_memory=*/true) {
  std::vector<std::string> params;
  for (const auto& [param, grad] : tg_.grads) params.push_back(param);
  optimizer_ = Optimizer::create(options_.optimizer, tg_.graph, params);
}

StepResult Trainer::step(const std::map<std::string, ir::Tensor>& feeds) {
  RunOptions run;
  run.training = true;
  run.seed = options_.seed + static_cast<uint64_t>(steps_);
  run.values_version = fresh_values_version();  // params changed since the last step
  run.node_seconds = options_.node_seconds;
  std::map<std::string, ir::Tensor> outs = runner_.run(feeds, run);  // loss weight 1

  StepResult r;
  r.loss = outs.at(tg_.loss).at(0);
  if (!std::isfinite(r.loss))
    throw RuntimeFault("step " + std::to_string(steps_) + ": the loss is " +
                       std::to_string(r.loss) + "; stopping before the update");
  std::map<std::string, ir::Tensor> grads;
  for (const auto& [param, grad] : tg_.grads) grads[param] = outs.at(grad);
  const double max_norm = options_.clip_norm > 0 ? options_.clip_norm : INFINITY;
  r.grad_norm = clip_grad_norm(grads, max_norm);
  if (!std::isfinite(r.grad_norm))
    throw RuntimeFault("step " + std::to_string(steps_) + ": the gradient norm is " +
                       std::to_string(r.grad_norm) + "; stopping before the update");
  r.lr = options_.schedule.lr_at(steps_, options_.optimizer.lr);
  optimizer_->step(tg_.graph, grads, r.lr);
  // BatchNorm running statistics: copied into the buffers the model shares.
  for (const auto& [fresh, buffer] : tg_.buffer_updates) {
    ir::Tensor dst = *tg_.graph.value(buffer);  // a handle on the shared buffer
    const ir::Tensor& src = outs.at(fresh);
    std::memcpy(dst.raw(), src.raw(), src.nbytes());
  }
  ++steps_;
  return r;
}

}  // namespace pipetrain::exec
