// fuse_attention (fusion.h): the scaled dot-product attention exporters
// write as MatMul, Div/Mul, Add, Softmax, Dropout, MatMul becomes one
// Attention node.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/passes/fusion.h"
#include "ir/passes/rewrite.h"

namespace pipetrain::ir::passes {

using namespace detail;  // NOLINT(google-build-using-namespace): the passes' own helpers

namespace {

/// Node `n` multiplies one operand by a one-element constant (Mul either
/// way, Div by it): that operand and the factor, else nothing.
std::optional<std::pair<std::string, double>> scalar_factor(const Graph& g, const Node& n) {
  if (n.inputs.size() != 2 || !n.has_output(0)) return std::nullopt;
  if (n.op_type == "Div") {
    auto c = scalar(g, n.inputs[1]);
    if (c && *c != 0.0f) return std::pair{n.inputs[0], 1.0 / static_cast<double>(*c)};
  }
  if (n.op_type == "Mul")
    for (size_t k = 0; k < 2; ++k)
      if (auto c = scalar(g, n.inputs[k]); c && !scalar(g, n.inputs[1 - k]))
        return std::pair{n.inputs[1 - k], static_cast<double>(*c)};
  return std::nullopt;
}

bool is_f32(const Graph& g, const std::string& t) {
  return g.has_tensor(t) && g.tensor(t).dtype == DType::kF32;
}

/// `t` is the output of a Transpose (with a perm) that only `reader` reads,
/// whose perm keeps the stored last axis at read axis `contiguous`: that
/// node, so the Attention reads its input through the perm instead.
std::optional<size_t> absorbable_transpose(const Graph& g, const Uses& uses, const Rewrite& rw,
                                           const std::string& t, size_t reader, size_t contiguous) {
  auto p = uses.producer(t);
  if (!p || rw.claimed(*p) || !uses.only_reader(t, reader)) return std::nullopt;
  const Node& n = g.nodes[*p];
  if (n.op_type != "Transpose" || !n.has_attr("perm") || !n.has_input(0)) return std::nullopt;
  const std::vector<int64_t> perm = n.attr_ints("perm");
  const int64_t last = static_cast<int64_t>(g.tensor(t).shape.size()) - 1;
  if (perm.size() != static_cast<size_t>(last + 1) || contiguous >= perm.size() ||
      perm[contiguous] != last)
    return std::nullopt;
  return p;
}

/// Same rank (>= 3) and leading (batch) dims.
bool same_batch(const Shape& a, const Shape& b) {
  return a.size() >= 3 && a.size() == b.size() && std::equal(a.begin(), a.end() - 2, b.begin());
}

}  // namespace

int fuse_attention(Graph& g) {
  return run_pass(g, [&](size_t si, const Uses& uses, Rewrite& rw) {
    const Node& sm = g.nodes[si];
    if (sm.op_type != "Softmax" || !sm.has_input(0) || !sm.has_output(0)) return false;
    const Shape scores = g.tensor(sm.inputs[0]).shape;
    const int64_t rank = static_cast<int64_t>(scores.size());
    int64_t axis = sm.attr_int("axis", g.opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    if (rank < 3 || axis != rank - 1 || !is_f32(g, sm.inputs[0])) return false;
    const int64_t lq = scores[scores.size() - 2], lk = scores.back();
    std::vector<size_t> pattern = {si};
    // Walk back from the Softmax: an additive constant mask, a scale, the product.
    std::string t = sm.inputs[0];
    size_t reader = si;
    auto producer_of = [&](const std::string& x) -> std::optional<size_t> {
      auto p = uses.producer(x);
      if (!p || rw.claimed(*p) || !uses.only_reader(x, reader)) return std::nullopt;
      return p;
    };
    std::string mask;
    if (auto ai = producer_of(t); ai && g.nodes[*ai].op_type == "Add") {
      const Node& add = g.nodes[*ai];
      for (size_t k = 0; k < 2 && add.inputs.size() == 2 && mask.empty(); ++k) {
        const Tensor* m = g.value(add.inputs[k]);
        if (!m || m->dtype() != DType::kF32 || m->numel() != lq * lk || m->shape().size() < 2 ||
            m->shape()[m->shape().size() - 2] != lq)
          continue;
        mask = add.inputs[k];
        t = add.inputs[1 - k];
      }
      if (!mask.empty()) {
        if (g.tensor(t).shape != scores) return false;  // the mask broadcasts the scores up
        pattern.push_back(*ai);
        reader = *ai;
      }
    }
    double scale = 1.0;
    if (auto di = producer_of(t)) {
      if (auto f = scalar_factor(g, g.nodes[*di])) {
        scale *= f->second;
        t = f->first;
        pattern.push_back(*di);
        reader = *di;
      }
    }
    auto mi = producer_of(t);
    if (!mi) return false;
    const Node& qk = g.nodes[*mi];
    if (qk.op_type != "MatMul" || qk.inputs.size() != 2 || qk.has_attr("transA") ||
        qk.has_attr("transB"))
      return false;
    pattern.push_back(*mi);
    std::string q = qk.inputs[0];
    const std::string kt = qk.inputs[1];
    reader = *mi;
    size_t q_reader = *mi;
    if (auto di = producer_of(q)) {  // the scale on Q (PyTorch's MultiheadAttention)
      if (auto f = scalar_factor(g, g.nodes[*di])) {
        scale *= f->second;
        q = f->first;
        pattern.push_back(*di);
        q_reader = *di;
      }
    }
    if (!is_f32(g, q) || !is_f32(g, kt) || !same_batch(g.tensor(q).shape, scores) ||
        !same_batch(g.tensor(kt).shape, scores))
      return false;
    // Forward from the Softmax: a Dropout, then the product with V.
    std::string p = sm.outputs[0];
    float dropout = 0.0f;
    const Node* drop = nullptr;
    auto ri = uses.sole_reader(p);
    if (ri && !rw.claimed(*ri) && g.nodes[*ri].op_type == "Dropout") {
      drop = &g.nodes[*ri];
      if (!drop->has_output(0) || (drop->has_output(1) && (uses.outputs.count(drop->outputs[1]) ||
                                                           uses.consumers.count(drop->outputs[1]))))
        return false;  // someone reads its mask
      std::optional<float> ratio = drop->attr_float("ratio", 0.5f);
      if (drop->has_input(1)) ratio = scalar(g, drop->inputs[1]);
      if (!ratio || *ratio < 0.0f || *ratio >= 1.0f) return false;
      if (drop->has_input(2)) {
        const Tensor* mode = g.value(drop->inputs[2]);
        if (!mode || mode->numel() != 1 || mode->at(0) == 0) return false;  // idle ones are gone
      }
      dropout = *ratio;
      pattern.push_back(*ri);
      p = drop->outputs[0];
      ri = uses.sole_reader(p);
    }
    if (!ri || rw.claimed(*ri)) return false;
    const Node& pv = g.nodes[*ri];
    if (pv.op_type != "MatMul" || pv.inputs.size() != 2 || pv.inputs[0] != p ||
        pv.has_attr("transA") || pv.has_attr("transB") || !pv.has_output(0))
      return false;
    const std::string v = pv.inputs[1];
    if (!is_f32(g, v) || !same_batch(g.tensor(v).shape, scores) ||
        g.tensor(v).shape[scores.size() - 2] != lk)
      return false;
    pattern.push_back(*ri);
    Node att;
    att.name = unique_node_name(g, rw.new_names, pv.name + "/Attention");
    att.op_type = "Attention";
    // The split of heads and their merge (Transposes of the projections and
    // of O) are read through in place: the kernel gathers a few heads' rows
    // at a time into the cache, where each Transpose wrote and the block
    // reread a whole tensor (and their gradients did it again backward).
    const size_t axes = scores.size();
    auto absorb = [&](std::string& t, size_t at, size_t contiguous, const char* key) {
      if (auto ti = absorbable_transpose(g, uses, rw, t, at, contiguous)) {
        att.attrs[key] = Attribute(g.nodes[*ti].attr_ints("perm"));
        t = g.nodes[*ti].inputs[0];
        pattern.push_back(*ti);
      }
    };
    std::string kt_in = kt, v_in = v;
    absorb(q, q_reader, axes - 1, "q_perm");
    absorb(kt_in, *mi, axes - 2, "k_perm");
    absorb(v_in, *ri, axes - 1, "v_perm");
    std::string out = pv.outputs[0];
    if (auto oi = uses.sole_reader(out); oi && !rw.claimed(*oi)) {
      const Node& tr = g.nodes[*oi];
      const std::vector<int64_t> perm = tr.attr_ints("perm");
      if (tr.op_type == "Transpose" && tr.has_output(0) && perm.size() == axes &&
          perm.back() == rank - 1) {
        att.attrs["o_perm"] = Attribute(perm);
        out = tr.outputs[0];
        pattern.push_back(*oi);
      }
    }
    att.inputs = {q, kt_in, v_in};
    if (!mask.empty()) {
      const Shape m = g.value(mask)->shape();
      if (m != scores && m != Shape{lq, lk}) {  // (1, ..., 1, Lq, Lk): one (Lq, Lk) constant
        const std::string flat = unique_tensor_name(g, mask + "/attention_mask");
        g.set_value(flat, g.value(mask)->reshaped({lq, lk}), Role::kConstant);
        mask = flat;
      }
      att.inputs.push_back(mask);
    }
    att.outputs = {out};
    att.attrs["scale"] = Attribute(static_cast<float>(scale));
    if (dropout > 0.0f) {
      att.attrs["dropout"] = Attribute(dropout);
      if (drop->has_input(2)) att.attrs["training"] = Attribute(int64_t{1});
      if (drop->has_attr("seed")) att.attrs["seed"] = Attribute(drop->attr_int("seed", 0));
    }
    rw.replace(pattern, {att});
    return true;
  });
}

}  // namespace pipetrain::ir::passes
