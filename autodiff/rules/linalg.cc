// Gradients of Gemm and MatMul (with batch broadcasting and 1-D operands).
#include "autodiff/grad_builder.h"

namespace pipetrain::autodiff {

namespace {

using ir::Attribute;
Attribute i64(int64_t v) {
  return Attribute(v);
}

// Y = alpha A' B' + beta C with A' = transA ? A^T : A, B' = transB ? B^T : B.
// dA' = alpha dY B'^T, dB' = alpha A'^T dY, dC = beta dY summed to C's shape.
// Fused with its ReLU (ir/passes/fusion.h): the ReLU's gradient from Y first.
void gemm_grad(GradBuilder& b) {
  const ir::Node& n = b.node();
  const int64_t ta = n.attr_int("transA", 0), tb = n.attr_int("transB", 0);
  const float alpha = n.attr_float("alpha", 1.0f), beta = n.attr_float("beta", 1.0f);
  const bool relu = n.attr_string("activation", "") == "Relu";
  const std::string a = b.I(0), w = b.I(1);
  const std::string dy = relu ? b.emit1("ReluGrad", {b.GO(0), b.O(0)}) : b.GO(0);
  const Attribute al(alpha);
  if (b.wants(0)) {
    // transA = 0: dA = alpha dY B'^T; transA = 1: dA = alpha B' dY^T.
    std::string da = ta == 0 ? b.emit1("Gemm", {dy, w}, {{"alpha", al}, {"transB", i64(1 - tb)}})
                             : b.emit1("Gemm", {w, dy},
                                       {{"alpha", al}, {"transA", i64(tb)}, {"transB", i64(1)}});
    b.set_GI(0, da);
  }
  if (b.wants(1)) {
    // transB = 0: dB = alpha A'^T dY; transB = 1: dB = alpha dY^T A'.
    std::string dw = tb == 0 ? b.emit1("Gemm", {a, dy}, {{"alpha", al}, {"transA", i64(1 - ta)}})
                             : b.emit1("Gemm", {dy, a},
                                       {{"alpha", al}, {"transA", i64(1)}, {"transB", i64(ta)}});
    b.set_GI(1, dw);
  }
  if (b.wants(2)) {
    std::string dc = beta == 1.0f ? dy : b.emit1("Mul", {dy, b.scalar(beta)});
    b.set_GI(2, b.reduce_to(dc, b.shape(b.I(2))));
  }
}

/// MatMul(x, y) reading x and/or y with their last two axes swapped (the
/// kernels' transA / transB), so no Transpose node copies an operand.
std::string matmul_t(GradBuilder& b, const std::string& x, bool tx, const std::string& y, bool ty) {
  std::map<std::string, Attribute> attrs;
  if (tx) attrs["transA"] = i64(1);
  if (ty) attrs["transB"] = i64(1);
  return b.emit1("MatMul", {x, y}, attrs);
}

// Y = op(A) @ op(B) with numpy semantics, op a swap of the last two axes where
// transA / transB say so. 1-D operands are lifted to matrices ((K) -> (1, K)
// for A, (K, 1) for B) and dY reshaped to match; batch axes broadcast.
// dA = dY op(B)^T (transposed back when transA), dB = op(A)^T dY (likewise),
// each summed back over its broadcast batch axes.
void matmul_grad(GradBuilder& b) {
  const std::string a = b.I(0), w = b.I(1);
  const bool ta = b.node().attr_int("transA", 0) != 0, tb = b.node().attr_int("transB", 0) != 0;
  const ir::Shape sa = b.shape(a), sw = b.shape(w), sy = b.shape(b.O(0));
  ir::Shape a2 = sa.size() == 1 ? ir::Shape{1, sa[0]} : sa;
  ir::Shape w2 = sw.size() == 1 ? ir::Shape{sw[0], 1} : sw;
  ir::Shape y2 = sy;
  if (sa.size() == 1) y2.insert(y2.end() - (sw.size() == 1 ? 0 : 1), 1);
  if (sw.size() == 1) y2.push_back(1);
  const std::string al = b.reshape(a, a2), wl = b.reshape(w, w2), dy = b.reshape(b.GO(0), y2);
  const int64_t k = a2.back(), m = tb ? w2[0] : w2.back();
  if (w2.size() == 2 && a2.size() >= 2 && !ta) {
    // The common linear layer: fold the batch axes of A into rows and use one GEMM each.
    const int64_t rows = ir::numel(a2) / k;
    const std::string a_rows = b.reshape(al, {rows, k}), dy_rows = b.reshape(dy, {rows, m});
    if (b.wants(0)) {
      std::string da = b.emit1("Gemm", {dy_rows, wl}, {{"transB", i64(tb ? 0 : 1)}});
      b.set_GI(0, b.reshape(da, sa));
    }
    if (b.wants(1)) {
      std::string dw = tb ? b.emit1("Gemm", {dy_rows, a_rows}, {{"transA", i64(1)}})
                          : b.emit1("Gemm", {a_rows, dy_rows}, {{"transA", i64(1)}});
      b.set_GI(1, b.reshape(dw, sw));
    }
    return;
  }
  if (b.wants(0)) {
    std::string da = ta ? matmul_t(b, wl, tb, dy, true) : matmul_t(b, dy, false, wl, !tb);
    b.set_GI(0, b.reshape(b.reduce_to(da, a2), sa));
  }
  if (b.wants(1)) {
    std::string dw = tb ? matmul_t(b, dy, true, al, ta) : matmul_t(b, al, !ta, dy, false);
    b.set_GI(1, b.reshape(b.reduce_to(dw, w2), sw));
  }
}

// Attention (Q, Kt, V, mask?): one AttentionGrad from the forward's output,
// the rows' log-sum-exp (output 1) and the dropout seed state (output 2),
// both added when absent; the additive mask is a constant (fuse_attention).
void attention_grad(GradBuilder& b) {
  if (b.has_GO(1) || b.has_GO(2)) b.unsupported("a gradient through the log-sum-exp output");
  if (b.wants(3)) b.unsupported("a gradient for the attention mask");
  if (!b.has_GO(0)) return;
  const std::string lse = b.ensure_output(1, "lse");
  const std::string state =
      b.node().attr_float("dropout", 0.0f) > 0.0f ? b.ensure_output(2, "dropout_state") : "";
  const std::string mask = b.has_I(3) ? b.I(3) : "";
  // Q, K and V column blocks of one packed projection (q/k/v_cols): one
  // gradient for it, the kernel writing each block's part.
  const bool shared = b.node().has_attr("q_cols") && b.I(0) == b.I(1) && b.I(1) == b.I(2);
  auto outs =
      b.emit("AttentionGrad", {b.GO(0), b.I(0), b.I(1), b.I(2), mask, b.O(0), lse, state}, 3,
             b.node().attrs, {!b.wants(0), shared || !b.wants(1), shared || !b.wants(2)});
  for (size_t i = 0; i < (shared ? 1 : 3); ++i)
    if (!outs[i].empty()) b.set_GI(i, outs[i]);
}

}  // namespace

void register_linalg_rules(std::map<std::string, RuleEntry>& r) {
  r["Attention"] = {attention_grad};
  r["Gemm"] = {gemm_grad};
  r["MatMul"] = {matmul_grad};
}

}  // namespace pipetrain::autodiff
