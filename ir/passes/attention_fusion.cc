// fuse_attention (fusion.h): the scaled dot-product attention exporters
// write as MatMul, Div/Mul, Add, Softmax, Dropout, MatMul becomes one
// Attention node.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/attention_layout.h"
#include "ir/ops/data_movement.h"
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

/// Where an operand comes from a packed projection: Reshape(`block`) read
/// only by the operand's reader, `block` the columns [first, first + cols)
/// of `base`'s last axis cut by a Slice or a Split that only this reads.
struct ColumnBlock {
  std::string base;
  int64_t first = 0, cols = 0;
  std::vector<size_t> nodes;  // the Reshape, and the Slice (a Split is claimed separately)
  std::optional<size_t> split;
};

std::optional<ColumnBlock> column_block(const Graph& g, const Uses& uses, const Rewrite& rw,
                                        const std::string& t, size_t reader) {
  auto ri = uses.producer(t);
  if (!ri || rw.claimed(*ri) || !uses.only_reader(t, reader)) return std::nullopt;
  const Node& reshape = g.nodes[*ri];
  if (reshape.op_type != "Reshape" || !reshape.has_input(0)) return std::nullopt;
  const std::string part = reshape.inputs[0];
  auto pi = uses.producer(part);
  if (!pi || rw.claimed(*pi) || !uses.only_reader(part, *ri)) return std::nullopt;
  const Node& cut = g.nodes[*pi];
  if (!cut.has_input(0)) return std::nullopt;
  const Shape& in = g.tensor(cut.inputs[0]).shape;
  const Shape& out = g.tensor(part).shape;
  if (in.size() != out.size() || in.empty() ||
      !std::equal(in.begin(), in.end() - 1, out.begin()))  // only the last axis is cut
    return std::nullopt;
  ColumnBlock b;
  b.base = cut.inputs[0];
  b.cols = out.back();
  b.nodes = {*ri};
  const int64_t last = static_cast<int64_t>(in.size()) - 1;
  if (cut.op_type == "Split") {
    int64_t axis = cut.attr_int("axis", 0);
    if (axis < 0) axis += last + 1;
    if (axis != last) return std::nullopt;
    for (const auto& o : cut.outputs) {
      if (o == part) break;
      b.first += g.tensor(o).shape.back();
    }
    b.split = *pi;
    return b;
  }
  if (cut.op_type != "Slice" || cut.inputs.size() < 3) return std::nullopt;
  std::vector<std::vector<int64_t>> args;
  for (size_t k = 1; k < 5; ++k) {
    if (!cut.has_input(k)) {
      args.emplace_back();
      continue;
    }
    const Tensor* v = g.value(cut.inputs[k]);
    if (!v) return std::nullopt;
    args.push_back(v->to_i64());
  }
  const SliceSpec spec = resolve_slice(in, args[0], args[1], args[2], args[3]);
  for (size_t a = 0; a < in.size(); ++a)
    if (spec.step[a] != 1 || (static_cast<int64_t>(a) != last && spec.start[a] != 0))
      return std::nullopt;
  b.first = spec.start.back();
  b.nodes.push_back(*pi);
  return b;
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
    // Returns the node that now reads t (the absorbed Transpose, else `at`).
    auto absorb = [&](std::string& t, size_t at, size_t contiguous, const char* key) {
      if (auto ti = absorbable_transpose(g, uses, rw, t, at, contiguous)) {
        att.attrs[key] = Attribute(g.nodes[*ti].attr_ints("perm"));
        t = g.nodes[*ti].inputs[0];
        pattern.push_back(*ti);
        return *ti;
      }
      return at;
    };
    std::string kt_in = kt, v_in = v;
    const size_t q_at = absorb(q, q_reader, axes - 1, "q_perm");
    const size_t k_at = absorb(kt_in, *mi, axes - 2, "k_perm");
    const size_t v_at = absorb(v_in, *ri, axes - 1, "v_perm");
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
    // Q, K and V Reshaped column blocks of one packed projection that tile
    // its rows (a Slice each, or one Split): read in place too, and their
    // gradient is then one tensor (no Slices forward, no Concat backward).
    auto qb = column_block(g, uses, rw, q, q_at), kb = column_block(g, uses, rw, kt_in, k_at),
         vb = column_block(g, uses, rw, v_in, v_at);
    if (qb && kb && vb && qb->base == kb->base && kb->base == vb->base && is_f32(g, qb->base)) {
      const Shape& base = g.tensor(qb->base).shape;
      std::vector<const ColumnBlock*> order = {&*qb, &*kb, &*vb};
      std::sort(order.begin(), order.end(),
                [](const ColumnBlock* a, const ColumnBlock* b) { return a->first < b->first; });
      int64_t next = 0;
      for (const ColumnBlock* b : order) next = b->first == next ? next + b->cols : -1;
      const bool one_split = (qb->split.has_value() == kb->split.has_value()) &&
                             (kb->split.has_value() == vb->split.has_value()) &&
                             (!qb->split || (*qb->split == *kb->split && *kb->split == *vb->split &&
                                             g.nodes[*qb->split].outputs.size() == 3));
      // Each block must read as whole strided matrix rows (the schema's check).
      bool views = true;
      const struct {
        const std::string& t;
        const char* x;
        const ColumnBlock& b;
      } ops[] = {{q, "q", *qb}, {kt_in, "k", *kb}, {v_in, "v", *vb}};
      for (const auto& o : ops) {
        const Shape& stored = g.tensor(o.t).shape;
        const std::string perm_key = std::string(o.x) + "_perm";
        const std::vector<int64_t> perm = att.attr_ints(perm_key);
        const bool k_rows = std::string(o.x) == "k" && !perm.empty();
        const Shape read = perm.empty() ? stored : [&] {
          Shape r(stored.size());
          for (size_t i = 0; i < perm.size(); ++i) r[i] = stored[static_cast<size_t>(perm[i])];
          return r;
        }();
        const size_t rows_axis = k_rows ? axes - 1 : axes - 2;
        const int64_t n_rows = read[rows_axis], n_cols = read[k_rows ? axes - 2 : axes - 1];
        views = views && into_columns(operand_view(stored, perm, rows_axis), base.back(), o.b.first,
                                      o.b.cols, n_rows, n_cols);
      }
      if (next == base.back() && one_split && views) {
        for (const auto& o : ops) {
          att.attrs[std::string(o.x) + "_shape"] = Attribute(g.tensor(o.t).shape);
          att.attrs[std::string(o.x) + "_cols"] =
              Attribute(std::vector<int64_t>{o.b.first, o.b.cols});
          pattern.insert(pattern.end(), o.b.nodes.begin(), o.b.nodes.end());
        }
        if (qb->split) pattern.push_back(*qb->split);
        q = kt_in = v_in = qb->base;
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
