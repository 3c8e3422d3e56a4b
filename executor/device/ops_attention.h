// Shared implementation of the fused Attention op and its gradient (the
// CPU, portable and CUDA backends run this one code): blocks of query rows
// (of several batch matrices at once when they are short) go through a
// batched GEMM -> row softmax -> batched GEMM, so the scores exist one
// bounded block at a time and nothing of size Lq x Lk is kept for the
// backward, which recomputes a block's probabilities from the rows'
// log-sum-exp (flash-attention's recomputation, with whole key rows per
// block: a block of rows fits in memory, so no online softmax is needed).
// Dropout on the probabilities follows the counter-based rule of Dropout
// (dropout_rule.h) on the (batch..., Lq, Lk) index, regenerated backward.
#pragma once

#include <algorithm>

#include "executor/device/device_op.h"
#include "executor/device/dropout_rule.h"
#include "executor/device/math_f32.h"
#include "executor/device/row_math.h"

namespace pipetrain::exec::device {

/// Elements of the scores one block holds: 1 Mi floats (4 MiB), whatever
/// the sequence length (the unfused graph keeps batch x Lq x Lk of them).
inline constexpr int64_t kAttentionBlockElems = int64_t{1} << 20;

struct AttentionGeometry {
  int64_t batch = 1, lq = 0, lk = 0, d = 0, dv = 0;
  int64_t mask_stride = 0;  // between batch matrices: 0 (one (Lq, Lk) mask) or Lq Lk
  // A block: `block_mats` batch matrices x `block_rows` query rows of each
  // (all the rows of several matrices when they fit, else rows of one).
  int64_t block_mats = 1, block_rows = 1;
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
  const int64_t matrix = std::max<int64_t>(g.lq * g.lk, 1);
  if (matrix <= kAttentionBlockElems) {
    g.block_rows = std::max<int64_t>(g.lq, 1);
    g.block_mats =
        std::clamp<int64_t>(kAttentionBlockElems / matrix, 1, std::max<int64_t>(g.batch, 1));
  } else {
    g.block_rows = std::max<int64_t>(kAttentionBlockElems / std::max<int64_t>(g.lk, 1), 1);
  }
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

/// Where row i of a block (matrix b0 + i / rows, query q0 + i % rows) lives.
struct BlockRows {
  int64_t rows, lq, lk, b0, q0, mask_stride;
  /// Its row in (batch..., Lq): the index of LSE, O and dO rows.
  PIPETRAIN_HD int64_t global(int64_t i) const { return (b0 + i / rows) * lq + q0 + i % rows; }
  PIPETRAIN_HD const float* mask_row(const float* mask, int64_t i) const {
    return mask ? mask + (b0 + i / rows) * mask_stride + (q0 + i % rows) * lk : nullptr;
  }
};

/// Forward rows of one block: scores (already scale Q Kt) + mask -> the row's
/// log-sum-exp and its (dropped) probabilities, in place.
struct AttentionSoftmaxRows {
  float* s;
  const float* mask;  // null without
  float* lse;         // (batch..., Lq), or a block's worth of scratch (local)
  bool lse_local;
  BlockRows at;
  DropoutRule rule;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t lk = at.lk, row = at.global(i);
    float* x = s + i * lk;
    if (const float* m = at.mask_row(mask, i))
      for (int64_t j = 0; j < lk; ++j) x[j] += m[j];
    const float mx = max_row_f32(x, lk);
    for (int64_t j = 0; j < lk; ++j) x[j] = exp_f32_normal(x[j] - mx);
    const float sum = static_cast<float>(sum_row(x, lk));
    lse[lse_local ? i : row] = mx + ::logf(sum);
    const float inv = 1.0f / sum;
    if (rule.thr == 0) {
      for (int64_t j = 0; j < lk; ++j) x[j] *= inv;
      return;
    }
    const float kept = inv * rule.scale;
    for (int64_t j = 0; j < lk; ++j) x[j] = select_f32(rule.keeps(row * lk + j), x[j] * kept, 0.0f);
  }
};

/// Backward rows of one block: p holds scale Q Kt, dp holds dO V^T; out: p
/// the dropped probabilities (for dV), dp the scores' gradient
/// P (dP - rowsum(dO O)) (for dQ and dKt). `state`: the forward's
/// (seed base, dropout on) pair, or null without dropout.
struct AttentionGradRows {
  float* p;
  float* dp;
  const float* mask;  // null without
  const float* lse;   // (batch..., Lq)
  const float* dout;  // dO (batch..., Lq, dv)
  const float* out;   // O (batch..., Lq, dv)
  const int64_t* state;
  int64_t dv;
  BlockRows at;
  DropoutRule rule;  // thr and scale; base from state
  PIPETRAIN_HD void operator()(int64_t i) const {
    DropoutRule r = rule;
    if (!state || state[1] == 0) {
      r.thr = 0;
      r.scale = 1.0f;
    } else {
      r.base = static_cast<uint64_t>(state[0]);
    }
    const int64_t lk = at.lk, row = at.global(i);
    float* x = p + i * lk;
    float* g = dp + i * lk;
    const float* m = at.mask_row(mask, i);
    if (m)
      for (int64_t j = 0; j < lk; ++j) x[j] += m[j];
    const float l = lse[row];
    for (int64_t j = 0; j < lk; ++j) x[j] = exp_f32_normal(x[j] - l);
    const float rowsum = static_cast<float>(dot_row(dout + row * dv, out + row * dv, dv));
    if (r.thr == 0) {
      for (int64_t j = 0; j < lk; ++j) g[j] = x[j] * (g[j] - rowsum);
      return;
    }
    for (int64_t j = 0; j < lk; ++j) {
      const bool keep = r.keeps(row * lk + j);
      g[j] = x[j] * (select_f32(keep, g[j] * r.scale, 0.0f) - rowsum);
      x[j] = select_f32(keep, x[j] * r.scale, 0.0f);
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

/// Runs f(b0, nb, q0, n) over the blocks: nb matrices from b0, n query rows
/// from q0 of each.
template <typename F>
void for_each_block(const AttentionGeometry& g, const F& f) {
  for (int64_t b0 = 0; b0 < g.batch; b0 += g.block_mats)
    for (int64_t q0 = 0; q0 < g.lq; q0 += g.block_rows)
      f(b0, std::min(g.block_mats, g.batch - b0), q0, std::min(g.block_rows, g.lq - q0));
}

/// (Q, Kt, V, mask?) -> (O, LSE?, state?).
template <typename Exec>
void attention_op(Exec& ex, DeviceOpArgs& a) {
  const AttentionGeometry g = attention_geometry(a, 0);
  const DropoutRule rule = attention_dropout(*a.host);
  const float scale = a.n().attr_float("scale", 1.0f);
  const float *q = a.in[0].data<float>(), *kt = a.in[1].data<float>(), *v = a.in[2].data<float>();
  const float* mask = a.has_in(3) ? a.in[3].data<float>() : nullptr;
  float* o = a.out[0].data<float>();
  const bool lse_local = !a.has_out(1);
  float* lse =
      lse_local ? ex.template scratch<float>(g.block_mats * g.block_rows) : a.out[1].data<float>();
  if (a.has_out(2))
    ex.for_each(2, AttentionState{a.out[2].data<int64_t>(), static_cast<int64_t>(rule.base),
                                  rule.thr != 0 ? 1 : 0});
  float* s = ex.template scratch<float>(g.block_mats * g.block_rows * g.lk);
  for_each_block(g, [&](int64_t b0, int64_t nb, int64_t q0, int64_t n) {
    const int64_t row0 = b0 * g.lq + q0;
    ex.gemm_batched(false, false, n, g.lk, g.d, scale, q + row0 * g.d, g.d, g.lq * g.d,
                    kt + b0 * g.d * g.lk, g.lk, g.d * g.lk, 0.0f, s, g.lk, n * g.lk, nb);
    ex.for_each(nb * n,
                AttentionSoftmaxRows{s, mask, lse, lse_local,
                                     BlockRows{n, g.lq, g.lk, b0, q0, g.mask_stride}, rule});
    ex.gemm_batched(false, false, n, g.dv, g.lk, 1.0f, s, g.lk, n * g.lk, v + b0 * g.lk * g.dv,
                    g.dv, g.lk * g.dv, 0.0f, o + row0 * g.dv, g.dv, g.lq * g.dv, nb);
  });
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
  float* p = ex.template scratch<float>(g.block_mats * g.block_rows * g.lk);
  float* dp = ex.template scratch<float>(g.block_mats * g.block_rows * g.lk);
  for_each_block(g, [&](int64_t b0, int64_t nb, int64_t q0, int64_t n) {
    const int64_t row0 = b0 * g.lq + q0;
    const float *qb = q + row0 * g.d, *ktb = kt + b0 * g.d * g.lk, *vb = v + b0 * g.lk * g.dv,
                *dob = dout + row0 * g.dv;
    const int64_t sq = g.lq * g.d, skt = g.d * g.lk, sv = g.lk * g.dv, so = g.lq * g.dv,
                  ss = n * g.lk;
    ex.gemm_batched(false, false, n, g.lk, g.d, scale, qb, g.d, sq, ktb, g.lk, skt, 0.0f, p, g.lk,
                    ss, nb);
    ex.gemm_batched(false, true, n, g.lk, g.dv, 1.0f, dob, g.dv, so, vb, g.dv, sv, 0.0f, dp, g.lk,
                    ss, nb);
    ex.for_each(nb * n, AttentionGradRows{p, dp, mask, lse, dout, out, state, g.dv,
                                          BlockRows{n, g.lq, g.lk, b0, q0, g.mask_stride}, rule});
    const float beta = q0 == 0 ? 0.0f : 1.0f;  // key and value gradients sum over row blocks
    if (dvv)
      ex.gemm_batched(true, false, g.lk, g.dv, n, 1.0f, p, g.lk, ss, dob, g.dv, so, beta,
                      dvv + b0 * sv, g.dv, sv, nb);
    if (dq)
      ex.gemm_batched(false, true, n, g.d, g.lk, scale, dp, g.lk, ss, ktb, g.lk, skt, 0.0f,
                      dq + row0 * g.d, g.d, sq, nb);
    if (dkt)
      ex.gemm_batched(true, false, g.d, g.lk, n, scale, qb, g.d, sq, dp, g.lk, ss, beta,
                      dkt + b0 * skt, g.lk, skt, nb);
  });
}

}  // namespace pipetrain::exec::device
