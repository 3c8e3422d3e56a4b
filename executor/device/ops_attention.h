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
#include "ir/error.h"
#include "ir/ops/attention_layout.h"

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

/// `stored` read as Transpose(stored, perm) (perm empty: as stored).
inline ir::Shape read_as(const ir::Shape& stored, const std::vector<int64_t>& perm) {
  if (perm.empty()) return stored;
  ir::Shape out(stored.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = stored[static_cast<size_t>(perm[i])];
  return out;
}

/// The layout attribute of an operand (ir/ops/attention.cc): empty without.
inline std::vector<int64_t> layout_perm(const DeviceOpArgs& a, const char* key) {
  return a.n().has_attr(key) ? a.n().attr_ints(key) : std::vector<int64_t>{};
}

/// Operand `x` ("q", "k", "v") at input i as stored before its perm: the
/// input, or the column block of it that x_cols names, shaped x_shape.
inline ir::Shape stored_shape(const DeviceOpArgs& a, size_t i, const std::string& x) {
  return a.n().has_attr(x + "_cols") ? ir::Shape(a.n().attr_ints(x + "_shape")) : a.in[i].shape;
}

/// From Q (batch..., Lq, d), Kt (batch..., d, Lk), V (batch..., Lk, dv) (as
/// read through their layout attributes) and the mask at inputs
/// first..first+3 (shapes checked by the schema).
inline AttentionGeometry attention_geometry(const DeviceOpArgs& a, size_t first) {
  const ir::Shape q = read_as(stored_shape(a, first, "q"), layout_perm(a, "q_perm"));
  const ir::Shape kt = read_as(stored_shape(a, first + 1, "k"), layout_perm(a, "k_perm"));
  const ir::Shape v = read_as(stored_shape(a, first + 2, "v"), layout_perm(a, "v_perm"));
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

inline constexpr int kMaxAttentionBatchDims = 8;

/// Where one operand's matrices live in its tensor: matrix b (row-major over
/// the batch axes) at offset(b), its rows `row` apart, its columns contiguous
/// (ir::OperandView in fixed arrays, for device code).
struct MatrixView {
  int n = 0;  // batch axes
  int64_t dims[kMaxAttentionBatchDims] = {}, strides[kMaxAttentionBatchDims] = {};
  int64_t row = 0, base = 0;
  PIPETRAIN_HD int64_t offset(int64_t b) const {
    int64_t off = base;
    for (int i = n - 1; i >= 0; --i) {
      off += (b % dims[i]) * strides[i];
      b /= dims[i];
    }
    return off;
  }
};

/// The kernels' copy of an operand's view (ir/ops/attention_layout.h).
inline MatrixView matrix_view(const ir::OperandView& v) {
  MatrixView m;
  m.n = static_cast<int>(v.dims.size());
  if (m.n > kMaxAttentionBatchDims)
    throw RuntimeFault("attention operand with " + std::to_string(m.n) + " batch axes (at most " +
                       std::to_string(kMaxAttentionBatchDims) + ")");
  for (int i = 0; i < m.n; ++i) {
    m.dims[i] = v.dims[static_cast<size_t>(i)];
    m.strides[i] = v.strides[static_cast<size_t>(i)];
  }
  m.row = v.row;
  m.base = v.offset;
  return m;
}

/// Rows of `nb` `rows` x `cols` matrices b0, b0 + 1, ... between a strided
/// operand (`view`) and packed scratch (matrix after matrix): gathered into
/// `packed`, or scattered from it. Item i: row i / nb of matrix i % nb, so
/// consecutive items touch one row of neighbouring heads (adjacent in the
/// exporters' layouts) rather than rows a whole sequence step apart.
struct CopyRows {
  float* strided;
  float* packed;
  MatrixView view;
  int64_t b0, nb, rows, cols;
  bool scatter;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t m = i % nb, r = i / nb;
    float* s = strided + view.offset(b0 + m) + r * view.row;
    float* p = packed + (m * rows + r) * cols;
    if (scatter)
      for (int64_t c = 0; c < cols; ++c) s[c] = p[c];
    else
      for (int64_t c = 0; c < cols; ++c) p[c] = s[c];
  }
};

/// Q, K and V are column blocks of one input (node inputs first..first+2
/// one tensor, read through q/k/v_cols): its gradient is one tensor.
inline bool attention_inputs_shared(const ir::Node& n, size_t first) {
  return n.has_attr("q_cols") && n.inputs.size() > first + 2 &&
         n.inputs[first] == n.inputs[first + 1] && n.inputs[first + 1] == n.inputs[first + 2];
}

/// The operands' layouts: `packed` when every operand is stored as the
/// kernel reads it (no layout attributes), else their views; `k_rows`: K is
/// read as rows of K (k_perm), not as Kt.
struct AttentionLayout {
  bool packed = true, k_rows = false;
  MatrixView q, k, v, o;
  int64_t mats = 1;  // matrices per gathered block
};

/// Q, Kt, V stored at inputs first..first+2, O stored as `o_stored`; a
/// gathered block holds at most `gather_elems` floats of operands (the
/// Exec's attention_gather_elems()).
inline AttentionLayout attention_layout(const DeviceOpArgs& a, size_t first,
                                        const ir::Shape& o_stored, const AttentionGeometry& g,
                                        int64_t gather_elems) {
  AttentionLayout l;
  const auto qp = layout_perm(a, "q_perm"), kp = layout_perm(a, "k_perm"),
             vp = layout_perm(a, "v_perm"), op = layout_perm(a, "o_perm");
  l.packed = qp.empty() && kp.empty() && vp.empty() && op.empty() && !a.n().has_attr("q_cols") &&
             !a.n().has_attr("k_cols") && !a.n().has_attr("v_cols");
  if (l.packed) return l;
  const size_t r = o_stored.size();
  l.k_rows = !kp.empty();
  // Operand x at input i, rows along read axis `rows` (a matrix rows x cols).
  auto view = [&](size_t i, const std::string& x, const std::vector<int64_t>& perm, size_t rows,
                  int64_t n_rows, int64_t n_cols) {
    ir::OperandView v = ir::operand_view(stored_shape(a, i, x), perm, rows);
    if (a.n().has_attr(x + "_cols")) {  // a column block of the packed projection
      const std::vector<int64_t> c = a.n().attr_ints(x + "_cols");
      auto moved = ir::into_columns(v, a.in[i].shape.back(), c[0], c[1], n_rows, n_cols);
      if (!moved) throw RuntimeFault(a.n().describe() + ": " + x + "_cols is not a view");
      v = *moved;
    }
    return matrix_view(v);
  };
  l.q = view(first, "q", qp, r - 2, g.lq, g.d);
  l.k = l.k_rows ? view(first + 1, "k", kp, r - 1, g.lk, g.d)
                 : view(first + 1, "k", kp, r - 2, g.d, g.lk);
  l.v = view(first + 2, "v", vp, r - 2, g.lk, g.dv);
  l.o = matrix_view(ir::operand_view(o_stored, op.empty() ? op : ir::inverse_perm(op), r - 2));
  const int64_t per = g.lq * g.d + g.lk * g.d + g.lk * g.dv + g.lq * g.dv;
  l.mats = std::clamp<int64_t>(gather_elems / std::max<int64_t>(per, 1), 1, g.block_mats);
  return l;
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
  /// Its row counted from matrix b0's first: where O and dO rows are read.
  PIPETRAIN_HD int64_t local(int64_t i) const { return (i / rows) * lq + q0 + i % rows; }
  /// Its row in (batch..., Lq): the index of LSE rows and of the dropout mask.
  PIPETRAIN_HD int64_t global(int64_t i) const { return b0 * lq + local(i); }
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
  const float* dout;  // dO (matrices b0..., Lq, dv)
  const float* out;   // O (matrices b0..., Lq, dv)
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
    const int64_t own = at.local(i);
    const float rowsum = static_cast<float>(dot_row(dout + own * dv, out + own * dv, dv));
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

/// One block's operands: matrix b0's first element of each (in the tensors
/// themselves, or in packed scratch holding the block's matrices), matrices
/// lq d, lk d, lk dv and lq dv floats apart.
struct BlockOperands {
  const float *q, *k, *v;
  float* o;  // forward: O; backward: unused
  bool k_rows;
};

/// Per worker of the gathered path (Exec::run_workers): its slice of each
/// scratch array, `each` floats apart.
struct WorkerSlice {
  float* base;
  int64_t each;
  float* at(int64_t w) const { return base ? base + w * each : nullptr; }
};

/// (Q, Kt, V, mask?) -> (O, LSE?, state?).
template <typename Exec>
void attention_op(Exec& ex, DeviceOpArgs& a) {
  const AttentionGeometry g = attention_geometry(a, 0);
  const AttentionLayout l = attention_layout(a, 0, a.out[0].shape, g, ex.attention_gather_elems());
  const DropoutRule rule = attention_dropout(*a.host);
  const float scale = a.n().attr_float("scale", 1.0f);
  const float *q = a.in[0].data<float>(), *kt = a.in[1].data<float>(), *v = a.in[2].data<float>();
  const float* mask = a.has_in(3) ? a.in[3].data<float>() : nullptr;
  float* o = a.out[0].data<float>();
  const bool lse_local = !a.has_out(1);
  if (a.has_out(2))
    ex.for_each(2, AttentionState{a.out[2].data<int64_t>(), static_cast<int64_t>(rule.base),
                                  rule.thr != 0 ? 1 : 0});
  const int64_t mats = l.packed ? g.block_mats : l.mats;
  const int64_t sq = g.lq * g.d, sk = g.d * g.lk, sv = g.lk * g.dv, so = g.lq * g.dv;
  // One block's rows on `e`, its scores in s (and its LSE rows in lse when local).
  auto block = [&](auto& e, float* s, float* lse, const BlockOperands& m, int64_t b0, int64_t nb,
                   int64_t q0, int64_t n) {
    if (m.k_rows)  // scores = Q K^T with K's rows stored
      e.gemm_batched(false, true, n, g.lk, g.d, scale, m.q + q0 * g.d, g.d, sq, m.k, g.d, sk, 0.0f,
                     s, g.lk, n * g.lk, nb);
    else
      e.gemm_batched(false, false, n, g.lk, g.d, scale, m.q + q0 * g.d, g.d, sq, m.k, g.lk, sk,
                     0.0f, s, g.lk, n * g.lk, nb);
    e.for_each(nb * n, AttentionSoftmaxRows{s, mask, lse, lse_local,
                                            BlockRows{n, g.lq, g.lk, b0, q0, g.mask_stride}, rule});
    e.gemm_batched(false, false, n, g.dv, g.lk, 1.0f, s, g.lk, n * g.lk, m.v, g.dv, sv, 0.0f,
                   m.o + q0 * g.dv, g.dv, so, nb);
  };
  if (l.packed) {
    float* s = ex.template scratch<float>(mats * g.block_rows * g.lk);
    float* lse =
        lse_local ? ex.template scratch<float>(mats * g.block_rows) : a.out[1].data<float>();
    for_each_block(g, [&](int64_t b0, int64_t nb, int64_t q0, int64_t n) {
      block(ex, s, lse, {q + b0 * sq, kt + b0 * sk, v + b0 * sv, o + b0 * so, false}, b0, nb, q0,
            n);
    });
    return;
  }
  // Absorbed layouts: a few matrices gathered into packed scratch, their
  // row blocks run as above, O scattered back; the workers take turns at
  // the blocks, each in its own scratch.
  const int64_t blocks = (g.batch + mats - 1) / mats;
  const int64_t workers = ex.block_workers(blocks);
  auto slice = [&](int64_t each) {
    return WorkerSlice{ex.template scratch<float>(workers * each), each};
  };
  const WorkerSlice ss = slice(mats * g.block_rows * g.lk), qs = slice(mats * sq),
                    ks = slice(mats * sk), vs = slice(mats * sv), os = slice(mats * so);
  const WorkerSlice ls = lse_local ? slice(mats * g.block_rows) : WorkerSlice{nullptr, 0};
  const int64_t k_rows = l.k_rows ? g.lk : g.d, k_cols = l.k_rows ? g.d : g.lk;
  ex.run_workers(workers, [&](auto& e, int64_t w) {
    float *qw = qs.at(w), *kw = ks.at(w), *vw = vs.at(w), *ow = os.at(w);
    float* lse = lse_local ? ls.at(w) : a.out[1].data<float>();
    for (int64_t blk = w; blk < blocks; blk += workers) {
      const int64_t b0 = blk * mats, nb = std::min(mats, g.batch - b0);
      e.for_each(nb * g.lq, CopyRows{const_cast<float*>(q), qw, l.q, b0, nb, g.lq, g.d, false});
      e.for_each(nb * k_rows,
                 CopyRows{const_cast<float*>(kt), kw, l.k, b0, nb, k_rows, k_cols, false});
      e.for_each(nb * g.lk, CopyRows{const_cast<float*>(v), vw, l.v, b0, nb, g.lk, g.dv, false});
      for (int64_t q0 = 0; q0 < g.lq; q0 += g.block_rows)
        block(e, ss.at(w), lse, {qw, kw, vw, ow, l.k_rows}, b0, nb, q0,
              std::min(g.block_rows, g.lq - q0));
      e.for_each(nb * g.lq, CopyRows{o, ow, l.o, b0, nb, g.lq, g.dv, true});
    }
  });
}

/// (dO, Q, Kt, V, mask?, O, LSE, state?) -> (dQ, dKt, dV), any absent.
template <typename Exec>
void attention_grad_op(Exec& ex, DeviceOpArgs& a) {
  const AttentionGeometry g = attention_geometry(a, 1);
  const AttentionLayout l = attention_layout(a, 1, a.in[5].shape, g, ex.attention_gather_elems());
  const float scale = a.n().attr_float("scale", 1.0f);
  const DropoutRule rule = dropout_rule(0, a.n().attr_float("dropout", 0.0f));
  const float *dout = a.in[0].data<float>(), *q = a.in[1].data<float>(),
              *kt = a.in[2].data<float>(), *v = a.in[3].data<float>();
  const float* mask = a.has_in(4) ? a.in[4].data<float>() : nullptr;
  const float *out = a.in[5].data<float>(), *lse = a.in[6].data<float>();
  const int64_t* state = a.has_in(7) ? a.in[7].data<int64_t>() : nullptr;
  // Q, K and V column blocks of one packed projection: output 0 is its
  // gradient, each block scattered into its columns (they tile its rows).
  const bool shared = attention_inputs_shared(a.n(), 1);
  float* dq = a.has_out(0) ? a.out[0].data<float>() : nullptr;
  float* dkt = shared ? dq : a.has_out(1) ? a.out[1].data<float>() : nullptr;
  float* dvv = shared ? dq : a.has_out(2) ? a.out[2].data<float>() : nullptr;
  if (g.lq == 0) {  // no rows: the key and value gradients are zero
    if (shared && dq) ex.for_each(a.out[0].numel(), FillZeros{dq});
    if (!shared && dkt) ex.for_each(a.out[1].numel(), FillZeros{dkt});
    if (!shared && dvv) ex.for_each(a.out[2].numel(), FillZeros{dvv});
    return;
  }
  const int64_t mats = l.packed ? g.block_mats : l.mats;
  const int64_t sq = g.lq * g.d, skt = g.d * g.lk, sv = g.lk * g.dv, so = g.lq * g.dv;
  // One block's rows on `e` with scratch p and dp: operands at matrix b0
  // (q, k, v; dO and O) and the gradients' (dq, dk, dv).
  auto block = [&](auto& e, float* p, float* dp, const BlockOperands& m, const float* dob,
                   const float* ob, float* dqb, float* dkb, float* dvb, int64_t b0, int64_t nb,
                   int64_t q0, int64_t n) {
    const float* qb = m.q + q0 * g.d;
    const float* dorows = dob + q0 * g.dv;
    const int64_t ss = n * g.lk;
    if (m.k_rows)
      e.gemm_batched(false, true, n, g.lk, g.d, scale, qb, g.d, sq, m.k, g.d, skt, 0.0f, p, g.lk,
                     ss, nb);
    else
      e.gemm_batched(false, false, n, g.lk, g.d, scale, qb, g.d, sq, m.k, g.lk, skt, 0.0f, p, g.lk,
                     ss, nb);
    e.gemm_batched(false, true, n, g.lk, g.dv, 1.0f, dorows, g.dv, so, m.v, g.dv, sv, 0.0f, dp,
                   g.lk, ss, nb);
    e.for_each(nb * n, AttentionGradRows{p, dp, mask, lse, dob, ob, state, g.dv,
                                         BlockRows{n, g.lq, g.lk, b0, q0, g.mask_stride}, rule});
    const float beta = q0 == 0 ? 0.0f : 1.0f;  // key and value gradients sum over row blocks
    if (dvb)
      e.gemm_batched(true, false, g.lk, g.dv, n, 1.0f, p, g.lk, ss, dorows, g.dv, so, beta, dvb,
                     g.dv, sv, nb);
    if (dqb) {
      if (m.k_rows)  // dQ = scale dP K
        e.gemm_batched(false, false, n, g.d, g.lk, scale, dp, g.lk, ss, m.k, g.d, skt, 0.0f,
                       dqb + q0 * g.d, g.d, sq, nb);
      else
        e.gemm_batched(false, true, n, g.d, g.lk, scale, dp, g.lk, ss, m.k, g.lk, skt, 0.0f,
                       dqb + q0 * g.d, g.d, sq, nb);
    }
    if (dkb) {
      if (m.k_rows)  // dK = scale dP^T Q
        e.gemm_batched(true, false, g.lk, g.d, n, scale, dp, g.lk, ss, qb, g.d, sq, beta, dkb, g.d,
                       skt, nb);
      else
        e.gemm_batched(true, false, g.d, g.lk, n, scale, qb, g.d, sq, dp, g.lk, ss, beta, dkb, g.lk,
                       skt, nb);
    }
  };
  if (l.packed) {
    float* p = ex.template scratch<float>(mats * g.block_rows * g.lk);
    float* dp = ex.template scratch<float>(mats * g.block_rows * g.lk);
    for_each_block(g, [&](int64_t b0, int64_t nb, int64_t q0, int64_t n) {
      block(ex, p, dp, {q + b0 * sq, kt + b0 * skt, v + b0 * sv, nullptr, false}, dout + b0 * so,
            out + b0 * so, dq ? dq + b0 * sq : nullptr, dkt ? dkt + b0 * skt : nullptr,
            dvv ? dvv + b0 * sv : nullptr, b0, nb, q0, n);
    });
    return;
  }
  // Absorbed layouts: a few matrices' operands gathered into packed scratch,
  // their gradients scattered back once all row blocks have summed into
  // them; the workers take turns at the blocks, each in its own scratch.
  const int64_t blocks = (g.batch + mats - 1) / mats;
  const int64_t workers = ex.block_workers(blocks);
  auto slice = [&](int64_t each, bool want = true) {
    return want ? WorkerSlice{ex.template scratch<float>(workers * each), each}
                : WorkerSlice{nullptr, 0};
  };
  const WorkerSlice ps = slice(mats * g.block_rows * g.lk), dps = slice(mats * g.block_rows * g.lk),
                    qs = slice(mats * sq), ks = slice(mats * skt), vs = slice(mats * sv),
                    dos = slice(mats * so), os = slice(mats * so), dqs = slice(mats * sq, dq),
                    dks = slice(mats * skt, dkt), dvs = slice(mats * sv, dvv);
  const int64_t k_rows = l.k_rows ? g.lk : g.d, k_cols = l.k_rows ? g.d : g.lk;
  ex.run_workers(workers, [&](auto& e, int64_t w) {
    float *qw = qs.at(w), *kw = ks.at(w), *vw = vs.at(w), *dow = dos.at(w), *ow = os.at(w);
    float *dqw = dqs.at(w), *dkw = dks.at(w), *dvw = dvs.at(w);
    for (int64_t blk = w; blk < blocks; blk += workers) {
      const int64_t b0 = blk * mats, nb = std::min(mats, g.batch - b0);
      e.for_each(nb * g.lq, CopyRows{const_cast<float*>(q), qw, l.q, b0, nb, g.lq, g.d, false});
      e.for_each(nb * k_rows,
                 CopyRows{const_cast<float*>(kt), kw, l.k, b0, nb, k_rows, k_cols, false});
      e.for_each(nb * g.lk, CopyRows{const_cast<float*>(v), vw, l.v, b0, nb, g.lk, g.dv, false});
      e.for_each(nb * g.lq,
                 CopyRows{const_cast<float*>(dout), dow, l.o, b0, nb, g.lq, g.dv, false});
      e.for_each(nb * g.lq, CopyRows{const_cast<float*>(out), ow, l.o, b0, nb, g.lq, g.dv, false});
      for (int64_t q0 = 0; q0 < g.lq; q0 += g.block_rows)
        block(e, ps.at(w), dps.at(w), {qw, kw, vw, nullptr, l.k_rows}, dow, ow, dqw, dkw, dvw, b0,
              nb, q0, std::min(g.block_rows, g.lq - q0));
      if (dq) e.for_each(nb * g.lq, CopyRows{dq, dqw, l.q, b0, nb, g.lq, g.d, true});
      if (dkt) e.for_each(nb * k_rows, CopyRows{dkt, dkw, l.k, b0, nb, k_rows, k_cols, true});
      if (dvv) e.for_each(nb * g.lk, CopyRows{dvv, dvw, l.v, b0, nb, g.lk, g.dv, true});
    }
  });
}

}  // namespace pipetrain::exec::device
