// CPU kernels of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
// Scores are viewed as (N, C, D) with D = d1 * ... * dk, labels as (N, D).
//   NLL:  l[n, d] = -w[t] * x[n, t, d] with t = labels[n, d]; 0 where t = ignore_index
//   SCE:  NLL of log_prob = log_softmax(scores) along C
//   none: l (labels' shape); sum: sum l; mean: sum l / sum of the w[t] applied
//   (w = 1 without weights, so mean divides by the count of labels not ignored).
// Sums run in double, in (n, d) order.
#include <string>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/ew_common.h"
#include "ir/error.h"

namespace pipetrain::exec::cpu {

namespace {

using ir::DType;
using ir::Tensor;

struct LossDims {
  int64_t n = 0, c = 0, d = 1;
};

LossDims loss_dims(const ir::Shape& scores) {
  LossDims r;
  r.n = scores[0];
  r.c = scores[1];
  for (size_t i = 2; i < scores.size(); ++i) r.d *= scores[i];
  return r;
}

/// Writes the loss (per element or reduced) from log-probabilities logp.
template <typename L>
void nll_from_logp(const KernelContext& ctx, const float* logp, const L* labels,
                   const float* weight, const LossDims& dim, Tensor& loss) {
  // logp: (N, C, D); labels: (N, D); weight: (C) or nullptr
  const ir::Node& node = ctx.n();
  const bool has_ignore = node.has_attr("ignore_index");
  const int64_t ignore = node.attr_int("ignore_index", 0);
  const std::string reduction = node.attr_string("reduction", "mean");
  float* out = loss.data<float>();  // (N, D) for none, () otherwise
  double total = 0.0, weight_sum = 0.0;
  for (int64_t n = 0; n < dim.n; ++n)
    for (int64_t d = 0; d < dim.d; ++d) {
      const int64_t t = static_cast<int64_t>(labels[n * dim.d + d]);
      float l = 0.0f, w = 0.0f;
      if (!(has_ignore && t == ignore)) {
        if (t < 0 || t >= dim.c)
          throw RuntimeFault(node.describe() + ": label " + std::to_string(t) + " at (" +
                             std::to_string(n) + ", " + std::to_string(d) + ") is outside [0, " +
                             std::to_string(dim.c) + ")");
        w = weight ? weight[t] : 1.0f;
        l = -w * logp[(n * dim.c + t) * dim.d + d];
      }
      if (reduction == "none") out[n * dim.d + d] = l;
      total += l;
      weight_sum += w;
    }
  if (reduction == "sum") out[0] = static_cast<float>(total);
  // All labels ignored gives 0 / 0 = NaN, as the ONNX reference does.
  if (reduction == "mean") out[0] = static_cast<float>(total / weight_sum);
}

void run_loss(KernelContext& ctx, const float* logp) {
  const Tensor& labels = ctx.in(1);
  const float* weight = ctx.has_in(2) ? ctx.in(2).data<float>() : nullptr;
  const LossDims dim = loss_dims(ctx.in(0).shape());
  dispatch<int64_t, int32_t>(labels.dtype(), [&](auto tag) {
    using L = decltype(tag);
    nll_from_logp(ctx, logp, labels.data<L>(), weight, dim, ctx.out(0));
  });
}

void nll_kernel(KernelContext& ctx) {
  run_loss(ctx, ctx.in(0).data<float>());
}

void sce_kernel(KernelContext& ctx) {
  const Tensor& scores = ctx.in(0);
  const LossDims dim = loss_dims(scores.shape());
  std::vector<float> scratch;
  float* logp;  // (N, C, D)
  if (ctx.has_out(1)) {
    logp = ctx.out(1).data<float>();
  } else {
    scratch.resize(static_cast<size_t>(scores.numel()));
    logp = scratch.data();
  }
  softmax_f32(scores.data<float>(), logp, dim.n, dim.c, dim.d, /*log=*/true);
  run_loss(ctx, logp);
}

}  // namespace

CpuKernel kernel_SoftmaxCrossEntropyLoss() {
  return {with_f32<sce_kernel>, {DType::kF32, DType::kF16, DType::kBF16}, 0};
}
CpuKernel kernel_NegativeLogLikelihoodLoss() {
  return {with_f32<nll_kernel>, {DType::kF32, DType::kF16, DType::kBF16}, 0};
}

}  // namespace pipetrain::exec::cpu
