// Schemas of the fused attention op the fusion pass emits
// (ir/passes/fusion.h: fuse_attention) and of its gradient. Both are
// internal: a model file that names one is refused by the importer.
#include <string>

#include "ir/op_registry.h"
#include "ir/ops/attention_layout.h"

namespace pipetrain::ir {

namespace {

const std::vector<AttrSpec> kAttentionAttrs = {
    {"scale", AttrType::kFloat},  {"dropout", AttrType::kFloat}, {"training", AttrType::kInt},
    {"seed", AttrType::kInt},     {"q_perm", AttrType::kInts},   {"k_perm", AttrType::kInts},
    {"v_perm", AttrType::kInts},  {"o_perm", AttrType::kInts},   {"q_shape", AttrType::kInts},
    {"k_shape", AttrType::kInts}, {"v_shape", AttrType::kInts},  {"q_cols", AttrType::kInts},
    {"k_cols", AttrType::kInts},  {"v_cols", AttrType::kInts}};

/// Operand `x` ("q", "k", "v") at input i as stored before its perm: the
/// input itself, or with x_cols = (first, cols) the block [first, first +
/// cols) of the input's last axis (a packed q/k/v projection's part),
/// reshaped to x_shape.
Shape stored_operand(InferContext& c, size_t i, const std::string& x) {
  const std::string key = x + "_cols";
  if (!c.node().has_attr(key)) return c.shape(i);
  const std::vector<int64_t> cols = c.node().attr_ints(key);
  const Shape shape = c.node().attr_ints(x + "_shape");
  const Shape& in = c.shape(i);
  if (cols.size() != 2 || in.empty() || cols[0] < 0 || cols[1] <= 0 ||
      cols[0] + cols[1] > in.back() || numel(shape) * in.back() != numel(in) * cols[1])
    c.fail(key + " and " + x + "_shape do not name a column block of " + shape_str(in));
  return shape;
}

/// The layout attribute `key` (a Transpose's perm the fusion absorbed):
/// the operand is stored as `stored` and read as Transpose(stored, perm),
/// whose axis `contiguous` must be the stored last one (rows are read in
/// runs). Returns the shape read; without the attribute, `stored`.
Shape permuted(InferContext& c, const char* key, const Shape& stored, size_t contiguous) {
  if (!c.node().has_attr(key)) return stored;
  const std::vector<int64_t> perm = c.node().attr_ints(key);
  std::vector<bool> seen(stored.size(), false);
  bool ok = perm.size() == stored.size();
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < static_cast<int64_t>(stored.size()) &&
         !seen[static_cast<size_t>(perm[i])];
    if (ok) seen[static_cast<size_t>(perm[i])] = true;
  }
  if (!ok) c.fail(std::string(key) + " is not a permutation of " + shape_str(stored) + "'s axes");
  if (perm[contiguous] != static_cast<int64_t>(stored.size()) - 1)
    c.fail(std::string(key) + " must keep the stored last axis as axis " +
           std::to_string(contiguous) + " (rows are read contiguously)");
  Shape out(stored.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = stored[static_cast<size_t>(perm[i])];
  return out;
}

struct AttentionShapes {
  Shape batch;
  int64_t lq = 0, lk = 0, d = 0, dv = 0;
};

/// Q (batch..., Lq, d), Kt (batch..., d, Lk), V (batch..., Lk, dv) and a mask
/// of shape (Lq, Lk) or (batch..., Lq, Lk), checked from input `first` on;
/// each of Q, Kt and V as read through its layout attribute (permuted()):
/// Q and V with their columns stored last, Kt with d stored last (K's rows).
AttentionShapes attention_shapes(InferContext& c, size_t first) {
  const Shape sq = stored_operand(c, first, "q"), sk = stored_operand(c, first + 1, "k"),
              sv = stored_operand(c, first + 2, "v");
  const size_t rank = sq.size();
  if (rank < 3 || sk.size() != rank || sv.size() != rank)
    c.fail("Q, K^T and V must have one rank >= 3, got " + shape_str(sq) + ", " + shape_str(sk) +
           " and " + shape_str(sv));
  const Shape q = permuted(c, "q_perm", sq, rank - 1);
  const Shape kt = permuted(c, "k_perm", sk, rank - 2);
  const Shape v = permuted(c, "v_perm", sv, rank - 1);
  if (q.size() < 3 || kt.size() != q.size() || v.size() != q.size())
    c.fail("Q, K^T and V must have one rank >= 3, got " + shape_str(q) + ", " + shape_str(kt) +
           " and " + shape_str(v));
  AttentionShapes s;
  s.batch.assign(q.begin(), q.end() - 2);
  s.lq = q[q.size() - 2];
  s.d = q.back();
  s.lk = kt.back();
  s.dv = v.back();
  if (Shape(kt.begin(), kt.end() - 2) != s.batch || Shape(v.begin(), v.end() - 2) != s.batch ||
      kt[kt.size() - 2] != s.d || v[v.size() - 2] != s.lk)
    c.fail("Q " + shape_str(q) + ", K^T " + shape_str(kt) + " and V " + shape_str(v) +
           " do not make (batch..., Lq, d) x (batch..., d, Lk) x (batch..., Lk, dv)");
  for (size_t i = first; i < first + 3; ++i)
    if (c.dtype(i) != DType::kF32) c.fail("Q, K^T and V must be float32");
  if (c.has_input(first + 3)) {
    const Shape& m = c.shape(first + 3);
    Shape full = s.batch;
    full.push_back(s.lq);
    full.push_back(s.lk);
    if (c.dtype(first + 3) != DType::kF32 || (m != Shape{s.lq, s.lk} && m != full))
      c.fail("the additive mask must be float32 of shape " + shape_str(Shape{s.lq, s.lk}) + " or " +
             shape_str(full) + ", got " + shape_str(m));
  }
  // A column block must be readable as strided matrices (whole rows each).
  const struct {
    const char* x;
    const Shape& stored;
    size_t rows;
    int64_t n_rows, n_cols;
  } blocks[] = {
      {"q", sq, rank - 2, s.lq, s.d},
      {"k", sk, c.node().has_attr("k_perm") ? rank - 1 : rank - 2,
       c.node().has_attr("k_perm") ? s.lk : s.d, c.node().has_attr("k_perm") ? s.d : s.lk},
      {"v", sv, rank - 2, s.lk, s.dv}};
  for (size_t j = 0; j < 3; ++j) {
    const std::string x = blocks[j].x;
    if (!c.node().has_attr(x + "_cols")) continue;
    const std::vector<int64_t> perm = c.node().attr_ints(x + "_perm");
    const std::vector<int64_t> cols = c.node().attr_ints(x + "_cols");
    if (!into_columns(operand_view(blocks[j].stored, perm, blocks[j].rows),
                      c.shape(first + j).back(), cols[0], cols[1], blocks[j].n_rows,
                      blocks[j].n_cols))
      c.fail(x + "_cols: " + shape_str(blocks[j].stored) + " is no strided view of " +
             shape_str(c.shape(first + j)) + "'s columns");
  }
  return s;
}

}  // namespace

// (Q, Kt, V, mask?) -> (O, LSE?, dropout_base?): O = dropout(softmax(scale Q Kt
// + mask)) V over the last two axes (q_perm, k_perm, v_perm: an input is
// stored as the Transpose the fusion absorbed, read through it; o_perm: O is
// written as Transpose(O, o_perm), the heads merged); LSE (batch..., Lq) the rows' log-sum-exp
// the backward recomputes the probabilities from; dropout_base (2) int64 the
// run's mask seed and whether dropout was on, so the backward regenerates the
// mask instead of keeping it.
OpSchema schema_Attention() {
  OpSchema s;
  s.min_inputs = 3;
  s.max_inputs = 4;
  s.min_outputs = 1;
  s.max_outputs = 3;
  s.attrs = kAttentionAttrs;
  s.internal = true;
  s.infer = [](InferContext& c) {
    const AttentionShapes a = attention_shapes(c, 0);
    Shape o = a.batch, lse = a.batch;
    o.push_back(a.lq);
    o.push_back(a.dv);
    lse.push_back(a.lq);
    // Stored as Transpose(O, o_perm) with O's columns last (the merge of heads).
    if (c.node().has_attr("o_perm")) {
      const std::vector<int64_t> perm = c.node().attr_ints("o_perm");
      Shape stored(o.size());
      std::vector<bool> seen(o.size(), false);
      bool ok = perm.size() == o.size() && perm.back() == static_cast<int64_t>(o.size()) - 1;
      for (size_t i = 0; ok && i < perm.size(); ++i) {
        ok = perm[i] >= 0 && perm[i] < static_cast<int64_t>(o.size()) &&
             !seen[static_cast<size_t>(perm[i])];
        if (ok) {
          seen[static_cast<size_t>(perm[i])] = true;
          stored[i] = o[static_cast<size_t>(perm[i])];
        }
      }
      if (!ok)
        c.fail("o_perm must be a permutation of the output's axes keeping the last one last");
      o = stored;
    }
    c.set_output(0, DType::kF32, o);
    if (c.num_outputs() > 1) c.set_output(1, DType::kF32, lse);
    if (c.num_outputs() > 2) c.set_output(2, DType::kI64, {2});
  };
  return s;
}

// (dO, Q, Kt, V, mask?, O, LSE, dropout_base?) -> (dQ, dKt, dV), the
// probabilities recomputed block by block from LSE (no (Lq, Lk) tensor kept).
OpSchema schema_AttentionGrad() {
  OpSchema s;
  s.min_inputs = 7;
  s.max_inputs = 8;
  s.min_outputs = 1;
  s.max_outputs = 3;
  s.attrs = kAttentionAttrs;
  s.internal = true;
  s.differentiable = false;
  s.infer = [](InferContext& c) {
    attention_shapes(c, 1);
    if (c.shape(0) != c.shape(5)) c.fail("dO and O differ in shape");
    for (size_t k = 0; k < 3 && k < c.num_outputs(); ++k)
      c.set_output(k, DType::kF32, c.shape(k + 1));
  };
  return s;
}

}  // namespace pipetrain::ir
