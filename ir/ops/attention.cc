// Schemas of the fused attention op the fusion pass emits
// (ir/passes/fusion.h: fuse_attention) and of its gradient. Both are
// internal: a model file that names one is refused by the importer.
#include <string>

#include "ir/op_registry.h"

namespace pipetrain::ir {

namespace {

const std::vector<AttrSpec> kAttentionAttrs = {{"scale", AttrType::kFloat},
                                               {"dropout", AttrType::kFloat},
                                               {"training", AttrType::kInt},
                                               {"seed", AttrType::kInt}};

struct AttentionShapes {
  Shape batch;
  int64_t lq = 0, lk = 0, d = 0, dv = 0;
};

/// Q (batch..., Lq, d), Kt (batch..., d, Lk), V (batch..., Lk, dv) and a mask
/// of shape (Lq, Lk) or (batch..., Lq, Lk), checked from input `first` on.
AttentionShapes attention_shapes(InferContext& c, size_t first) {
  const Shape &q = c.shape(first), &kt = c.shape(first + 1), &v = c.shape(first + 2);
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
  return s;
}

}  // namespace

// (Q, Kt, V, mask?) -> (O, LSE?, dropout_base?): O = dropout(softmax(scale Q Kt
// + mask)) V over the last two axes; LSE (batch..., Lq) the rows' log-sum-exp
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
