#include <cassert>
#include <cmath>

#include "executor/optim/optimizer.h"
#include "ir/error.h"

namespace pipetrain::exec {

void LrSchedule::validate() const {
  auto fail = [&](const std::string& msg) {
    throw ModelError("lr schedule '" + kind + "': " + msg);
  };
  if (kind != "constant" && kind != "step" && kind != "cosine")
    throw ModelError("unknown lr schedule '" + kind + "' (constant, step, cosine)");
  if (warmup_steps < 0) fail("warmup_steps must be >= 0");
  if (kind == "step" && step_size <= 0) fail("step_size must be > 0");
  if (kind == "step" && !(gamma > 0)) fail("gamma must be > 0");
  if (kind == "cosine" && total_steps <= warmup_steps)
    fail("total_steps (" + std::to_string(total_steps) + ") must exceed warmup_steps (" +
         std::to_string(warmup_steps) + ")");
}

double LrSchedule::lr_at(int64_t step, double base_lr) const {
  assert(step >= 0);
  if (step < warmup_steps)
    return base_lr * static_cast<double>(step) / static_cast<double>(warmup_steps);
  const int64_t t = step - warmup_steps;
  if (kind == "step") return base_lr * std::pow(gamma, static_cast<double>(t / step_size));
  if (kind == "cosine") {
    const int64_t span = total_steps - warmup_steps;
    if (t >= span) return min_lr;
    return min_lr +
           (base_lr - min_lr) *
               (1.0 + std::cos(M_PI * static_cast<double>(t) / static_cast<double>(span))) / 2.0;
  }
  return base_lr;
}

}  // namespace pipetrain::exec
