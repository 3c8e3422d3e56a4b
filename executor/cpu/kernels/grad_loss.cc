// CPU kernels of SoftmaxCrossEntropyLossGrad and NegativeLogLikelihoodLossGrad
// (f32), the adjoints of the losses in loss.cc. Scores are viewed as (N, C, D)
// with D = d1 * ... * dk, labels as (N, D). With t = labels[n, d] and
// g[n, d] = dloss[n, d] (none), dloss (sum) or dloss / sum of the w[t] of
// the labels not ignored (mean), the coefficient of each label is
// a[n, d] = g[n, d] w[t] (0 where t = ignore_index), and
//   NLL: dinput[n, c, d] = -a[n, d] [c = t]
//   SCE: dscores[n, c, d] = a[n, d] (softmax(scores)[n, c, d] - [c = t])
// (SCE is NLL of log_softmax; log_softmax's adjoint turns -a [c = t] into the above).
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

/// a[n, d] as above and which labels count (not ignored), both (N, D).
struct Coefficients {
  std::vector<float> a;
  std::vector<uint8_t> kept;
};

/// Labels out of [0, C) are a RuntimeFault, as in the forward.
template <typename L>
Coefficients label_coefficients(const KernelContext& ctx, const L* labels, const float* weight,
                                const LossDims& dim) {
  // labels: (N, D); weight: (C) or nullptr
  const ir::Node& node = ctx.n();
  const bool has_ignore = node.has_attr("ignore_index");
  const int64_t ignore = node.attr_int("ignore_index", 0);
  const std::string reduction = node.attr_string("reduction", "mean");
  const Tensor& dloss = ctx.in(0);  // (N, D...) for none, () otherwise
  const float* g = dloss.data<float>();
  const int64_t m = dim.n * dim.d;
  if (dloss.numel() != (reduction == "none" ? m : 1))
    throw ModelError(node.describe() + ": loss gradient " + ir::shape_str(dloss.shape()) +
                     " does not match reduction '" + reduction + "' over " + std::to_string(m) +
                     " labels");
  Coefficients r;
  r.a.assign(static_cast<size_t>(m), 0.0f);
  r.kept.assign(static_cast<size_t>(m), 0);
  float* a = r.a.data();
  double weight_sum = 0.0;  // in (n, d) order, as the forward
  for (int64_t i = 0; i < m; ++i) {
    const int64_t t = static_cast<int64_t>(labels[i]);
    if (has_ignore && t == ignore) continue;  // a stays 0
    if (t < 0 || t >= dim.c)
      throw RuntimeFault(node.describe() + ": label " + std::to_string(t) + " at (" +
                         std::to_string(i / dim.d) + ", " + std::to_string(i % dim.d) +
                         ") is outside [0, " + std::to_string(dim.c) + ")");
    const float w = weight ? weight[t] : 1.0f;
    a[i] = w;
    r.kept[static_cast<size_t>(i)] = 1;
    weight_sum += w;
  }
  // mean: d(total / weight_sum) = dloss / weight_sum per unit of total.
  // Ignored labels keep a = 0 even when weight_sum is 0 (all ignored), as in
  // PyTorch; kept labels of weight 0 then get 0 * inf = NaN, as there.
  const float scale =
      reduction == "mean" ? static_cast<float>(static_cast<double>(g[0]) / weight_sum) : g[0];
  for (int64_t i = 0; i < m; ++i)
    if (r.kept[static_cast<size_t>(i)]) a[i] *= reduction == "none" ? g[i] : scale;
  return r;
}

/// Calls f(a) with the coefficients of the node's labels (input 2) and weights (input 3).
template <typename F>
void with_labels(const KernelContext& ctx, const LossDims& dim, F&& f) {
  const Tensor& labels = ctx.in(2);                                         // (N, D)
  const float* weight = ctx.has_in(3) ? ctx.in(3).data<float>() : nullptr;  // (C)
  dispatch<int64_t, int32_t>(labels.dtype(), [&](auto tag) {
    using L = decltype(tag);
    const L* l = labels.data<L>();
    f(l, label_coefficients(ctx, l, weight, dim));
  });
}

LossDims loss_dims(const ir::Shape& scores) {
  LossDims r;
  r.n = scores[0];
  r.c = scores[1];
  for (size_t i = 2; i < scores.size(); ++i) r.d *= scores[i];
  return r;
}

/// Index of (n, c = labels[n, d], d) in (N, C, D).
template <typename L>
int64_t label_offset(const L* labels, int64_t i, const LossDims& dim) {
  const int64_t n = i / dim.d, d = i % dim.d;
  return (n * dim.c + static_cast<int64_t>(labels[i])) * dim.d + d;
}

void nll_grad(KernelContext& ctx) {
  const LossDims dim = loss_dims(ctx.in(1).shape());  // input: (N, C, D)
  float* dx = ctx.out(0).data<float>();               // (N, C, D), zero-filled
  with_labels(ctx, dim, [&](const auto* labels, const Coefficients& k) {
    for (int64_t i = 0; i < dim.n * dim.d; ++i)
      if (k.kept[static_cast<size_t>(i)])
        dx[label_offset(labels, i, dim)] = -k.a[static_cast<size_t>(i)];
  });
}

void sce_grad(KernelContext& ctx) {
  const Tensor& scores = ctx.in(1);  // (N, C, D)
  const LossDims dim = loss_dims(scores.shape());
  float* dx = ctx.out(0).data<float>();  // (N, C, D)
  with_labels(ctx, dim, [&](const auto* labels, const Coefficients& k) {
    softmax_f32(scores.data<float>(), dx, dim.n, dim.c, dim.d, /*log=*/false);
    for (int64_t n = 0; n < dim.n; ++n) {
      const float* an = k.a.data() + n * dim.d;  // (D)
      for (int64_t c = 0; c < dim.c; ++c) {
        float* row = dx + (n * dim.c + c) * dim.d;  // (D)
        for (int64_t d = 0; d < dim.d; ++d) row[d] *= an[d];
      }
    }
    for (int64_t i = 0; i < dim.n * dim.d; ++i)
      if (k.kept[static_cast<size_t>(i)])
        dx[label_offset(labels, i, dim)] -= k.a[static_cast<size_t>(i)];
  });
}

}  // namespace

CpuKernel kernel_SoftmaxCrossEntropyLossGrad() {
  return {sce_grad, {DType::kF32}, 0};
}
CpuKernel kernel_NegativeLogLikelihoodLossGrad() {
  return {nll_grad, {DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
