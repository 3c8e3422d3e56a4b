// Shared implementation of the fused Attention op and its gradient (the
// CPU, portable and CUDA backends run this one code): per batch matrix,
// blocks of query rows go through GEMM -> row softmax -> GEMM, so the
// (Lq, Lk) scores exist only one block at a time and nothing of that size is
// kept for the backward, which recomputes the block's probabilities from the
// rows' log-sum-exp (flash-attention's recomputation, with whole key rows per
// block: a CPU cache holds a block of rows, so no online softmax is needed).
// Dropout on the probabilities follows the counter-based rule of Dropout
// (dropout_rule.h) on the (batch..., Lq, Lk) index, regenerated backward.
#pragma once

#include <algorithm>

#include "executor/device/device_op.h"
#include "executor/device/dropout_rule.h"
#include "executor/device/math_f32.h"
#include "executor/device/row_math.h"

namespace pipetrain::exec::device {

/// Rows of the scores one block holds: at most 64 Ki floats (256 KiB).
inline constexpr int64_t kAttentionBlockElems = int64_t{1} << 16;

struct AttentionGeometry {
  int64_t batch = 1, lq = 0, lk = 0, d = 0, dv = 0;
  int64_t mask_stride = 0;  // between batch matrices: 0 (one (Lq, Lk) mask) or Lq Lk
  int64_t block_rows = 1;
};

/// From Q (batch..., Lq, d), Kt (batch..., d, Lk), V (batch..., Lk, dv) and
/// the mask at inputs first..first+3 (shapes checked by the schema).
inline AttentionGeometry attention_geometry(const DeviceOpArgs& a, size_t first) {
  const ir::Shape &q = a.in[first].shape, &kt = a.in[first + 1].shape, &v = a.in[first + 2].shape;
  AttentionGeometry g;
  for (size_t i = 0; i + 2 < q.size(); ++i) g.batch *= q[i];
  g.lq = q[q.size() - 2];
  g.d = q.back();
  g.lk = kt.back();
  g.dv = v.back();
  if (a.has_in(first + 3) && a.in[first + 3].shape.size() > 2) g.mask_stride = g.lq * g.lk;
  g.block_rows = std::clamp<int64_t>(kAttentionBlockElems / std::max<int64_t>(g.lk, 1), 1,
                                     std::max<int64_t>(g.lq, 1));
  return g;
}

/// The forward's dropout: the `dropout` ratio when the run trains (or the
/// node says training = 1), seeded by the node's `seed` or the run's.
inline DropoutRule attention_dropout(const KernelContext& h) {
  const float ratio = h.n().attr_float("dropout", 0.0f);
  const bool on = h.n().has_attr("training") ? h.n().attr_int("training", 0) != 0 : h.training;
  if (!on || ratio <= 0.0f) return {};
  const uint64_t seed =
      h.n().has_attr("seed") ? static_cast<uint64_t>(h.n().attr_int("seed", 0)) : h.seed;
  return dropout_rule(seed, ratio);
}

/// Forward rows of one block: scores (already scale Q Kt) + mask -> the row's
/// log-sum-exp and its (dropped) probabilities, in place.
struct AttentionSoftmaxRows {
  float* s;
  const float* mask;  // the block's first row, or null
  float* lse;         // the block's first row
  int64_t lk, row0;   // row0: the block's first row in (batch..., Lq)
  DropoutRule rule;
  PIPETRAIN_HD void operator()(int64_t i) const {
    float* x = s + i * lk;
    if (mask)
      for (int64_t j = 0; j < lk; ++j) x[j] += mask[i * lk + j];
    const float m = max_row(x, lk);
    for (int64_t j = 0; j < lk; ++j) x[j] = exp_f32(x[j] - m);
    const float sum = static_cast<float>(sum_row(x, lk));
    lse[i] = m + ::logf(sum);
    const int64_t at = (row0 + i) * lk;
    for (int64_t j = 0; j < lk; ++j) {
      const float p = x[j] / sum;
      x[j] = rule.thr == 0 ? p : select_f32(rule.keeps(at + j), p * rule.scale, 0.0f);
    }
  }
};

/// Backward rows of one block: p holds scale Q Kt, dp holds dO V^T; out: p
/// the dropped probabilities (for dV), dp the scores' gradient
/// P (dP - rowsum(dO O)) (for dQ and dKt). `state`: the forward's
/// (seed base, dropout on) pair, or null without dropout.
struct AttentionGradRows {
  float* p;
  float* dp;
  const float* mask;  // the block's first row, or null
  const float* lse;   // the block's first row
  const float* dout;  // dO, the block's first row
  const float* out;   // O, the block's first row
  const int64_t* state;
  int64_t lk, dv, row0;
  DropoutRule rule;  // thr and scale; base from state
  PIPETRAIN_HD void operator()(int64_t i) const {
    DropoutRule r = rule;
    if (!state || state[1] == 0) {
      r.thr = 0;
      r.scale = 1.0f;
    } else {
      r.base = static_cast<uint64_t>(state[0]);
    }
    float* x = p + i * lk;
    float* g = dp + i * lk;
    const float rowsum = static_cast<float>(dot_row(dout + i * dv, out + i * dv, dv));
    const int64_t at = (row0 + i) * lk;
    for (int64_t j = 0; j < lk; ++j) {
      const float prob = exp_f32(x[j] + (mask ? mask[i * lk + j] : 0.0f) - lse[i]);
      const bool keep = r.thr == 0 || r.keeps(at + j);
      g[j] = prob * (select_f32(keep, g[j] * r.scale, 0.0f) - rowsum);
      x[j] = select_f32(keep, prob * r.scale, 0.0f);
    }
  }
};

/// The forward's dropout state (seed base, on) for the gradient.
struct AttentionState {
  int64_t* y;
  int64_t base, on;
  PIPETRAIN_HD void operator()(int64_t i) const { y[i] = i == 0 ? base : on; }
};

struct FillZeros {
  float* y;
  PIPETRAIN_HD void operator()(int64_t i) const { y[i] = 0.0f; }
};

/// (Q, Kt, V, mask?) -> (O, LSE?, state?).
template <typename Exec>
void attention_op(Exec& ex, DeviceOpArgs& a) {
  const AttentionGeometry g = attention_geometry(a, 0);
  const DropoutRule rule = attention_dropout(*a.host);
  const float scale = a.n().attr_float("scale", 1.0f);
  const float *q = a.in[0].data<float>(), *kt = a.in[1].data<float>(), *v = a.in[2].data<float>();
  const float* mask = a.has_in(3) ? a.in[3].data<float>() : nullptr;
  float* o = a.out[0].data<float>();
  float* lse = a.has_out(1) ? a.out[1].data<float>() : ex.template scratch<float>(g.block_rows);
  if (a.has_out(2))
    ex.for_each(2, AttentionState{a.out[2].data<int64_t>(), static_cast<int64_t>(rule.base),
                                  rule.thr != 0 ? 1 : 0});
  float* s = ex.template scratch<float>(g.block_rows * g.lk);
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t q0 = 0; q0 < g.lq; q0 += g.block_rows) {
      const int64_t n = std::min(g.block_rows, g.lq - q0), row0 = b * g.lq + q0;
      ex.gemm(false, false, n, g.lk, g.d, scale, q + row0 * g.d, g.d, kt + b * g.d * g.lk, g.lk,
              0.0f, s, g.lk);
      ex.for_each(n, AttentionSoftmaxRows{s, mask ? mask + b * g.mask_stride + q0 * g.lk : nullptr,
                                          a.has_out(1) ? lse + row0 : lse, g.lk, row0, rule});
      ex.gemm(false, false, n, g.dv, g.lk, 1.0f, s, g.lk, v + b * g.lk * g.dv, g.dv, 0.0f,
              o + row0 * g.dv, g.dv);
    }
}

/// (dO, Q, Kt, V, mask?, O, LSE, state?) -> (dQ, dKt, dV), any absent.
template <typename Exec>
void attention_grad_op(Exec& ex, DeviceOpArgs& a) {
  const AttentionGeometry g = attention_geometry(a, 1);
  const float scale = a.n().attr_float("scale", 1.0f);
  const DropoutRule rule = dropout_rule(0, a.n().attr_float("dropout", 0.0f));
  const float *dout = a.in[0].data<float>(), *q = a.in[1].data<float>(),
              *kt = a.in[2].data<float>(), *v = a.in[3].data<float>();
  const float* mask = a.has_in(4) ? a.in[4].data<float>() : nullptr;
  const float *out = a.in[5].data<float>(), *lse = a.in[6].data<float>();
  const int64_t* state = a.has_in(7) ? a.in[7].data<int64_t>() : nullptr;
  float* dq = a.has_out(0) ? a.out[0].data<float>() : nullptr;
  float* dkt = a.has_out(1) ? a.out[1].data<float>() : nullptr;
  float* dvv = a.has_out(2) ? a.out[2].data<float>() : nullptr;
  if (g.lq == 0) {  // no rows: the key and value gradients are zero
    if (dkt) ex.for_each(a.out[1].numel(), FillZeros{dkt});
    if (dvv) ex.for_each(a.out[2].numel(), FillZeros{dvv});
    return;
  }
  float* p = ex.template scratch<float>(g.block_rows * g.lk);
  float* dp = ex.template scratch<float>(g.block_rows * g.lk);
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t q0 = 0; q0 < g.lq; q0 += g.block_rows) {
      const int64_t n = std::min(g.block_rows, g.lq - q0), row0 = b * g.lq + q0;
      const float *qb = q + row0 * g.d, *ktb = kt + b * g.d * g.lk, *vb = v + b * g.lk * g.dv,
                  *dob = dout + row0 * g.dv;
      ex.gemm(false, false, n, g.lk, g.d, scale, qb, g.d, ktb, g.lk, 0.0f, p, g.lk);
      ex.gemm(false, true, n, g.lk, g.dv, 1.0f, dob, g.dv, vb, g.dv, 0.0f, dp, g.lk);
      ex.for_each(
          n, AttentionGradRows{p, dp, mask ? mask + b * g.mask_stride + q0 * g.lk : nullptr,
                               lse + row0, dob, out + row0 * g.dv, state, g.lk, g.dv, row0, rule});
      const float beta = q0 == 0 ? 0.0f : 1.0f;  // key and value gradients sum over the blocks
      if (dvv)
        ex.gemm(true, false, g.lk, g.dv, n, 1.0f, p, g.lk, dob, g.dv, beta, dvv + b * g.lk * g.dv,
                g.dv);
      if (dq)
        ex.gemm(false, true, n, g.d, g.lk, scale, dp, g.lk, ktb, g.lk, 0.0f, dq + row0 * g.d, g.d);
      if (dkt)
        ex.gemm(true, false, g.d, g.lk, n, scale, qb, g.d, dp, g.lk, beta, dkt + b * g.d * g.lk,
                g.lk);
    }
}

}  // namespace pipetrain::exec::device
