#include "ir/passes/fusion.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "ir/passes/rewrite.h"

namespace pipetrain::ir::passes {

using namespace detail;  // NOLINT(google-build-using-namespace): the passes' own helpers

int fuse_gelu(Graph& g) {
  return run_pass(g, [&](size_t ei, const Uses& uses, Rewrite& rw) {
    const Node& erf = g.nodes[ei];
    if (erf.op_type != "Erf" || !erf.has_input(0) || !erf.has_output(0)) return false;
    // u = x / sqrt 2 (or x * (1 / sqrt 2)), read by the Erf alone.
    auto di = uses.producer(erf.inputs[0]);
    if (!di || rw.claimed(*di) || !uses.only_reader(erf.inputs[0], ei)) return false;
    const Node& div = g.nodes[*di];
    std::string x;
    if (div.op_type == "Div" && div.inputs.size() == 2 &&
        near(scalar(g, div.inputs[1]), std::sqrt(2.0)))
      x = div.inputs[0];
    else if (div.op_type == "Mul" && div.inputs.size() == 2) {
      for (int k = 0; k < 2; ++k)
        if (near(scalar(g, div.inputs[k]), std::sqrt(0.5))) x = div.inputs[1 - k];
    }
    if (x.empty() || !g.has_tensor(x) || g.tensor(x).dtype != DType::kF32) return false;
    // 1 + erf(u)
    auto ai = uses.sole_reader(erf.outputs[0]);
    if (!ai || rw.claimed(*ai)) return false;
    const Node& add = g.nodes[*ai];
    if (add.op_type != "Add" || !near(scalar(g, other_input(add, erf.outputs[0])), 1.0))
      return false;
    // x * (1 + erf) * 0.5, or (x * 0.5) * (1 + erf).
    auto m1 = uses.sole_reader(add.outputs[0]);
    if (!m1 || rw.claimed(*m1) || g.nodes[*m1].op_type != "Mul") return false;
    const std::string f1 = other_input(g.nodes[*m1], add.outputs[0]);
    std::vector<size_t> pattern = {*di, ei, *ai, *m1};
    std::string result;
    if (f1 == x) {
      auto m2 = uses.sole_reader(g.nodes[*m1].outputs[0]);
      if (!m2 || rw.claimed(*m2) || g.nodes[*m2].op_type != "Mul" ||
          !near(scalar(g, other_input(g.nodes[*m2], g.nodes[*m1].outputs[0])), 0.5))
        return false;
      pattern.push_back(*m2);
      result = g.nodes[*m2].outputs[0];
    } else {
      auto hi = uses.producer(f1);
      if (!hi || rw.claimed(*hi) || !uses.only_reader(f1, *m1) || g.nodes[*hi].op_type != "Mul" ||
          other_input(g.nodes[*hi], x).empty() ||
          !near(scalar(g, other_input(g.nodes[*hi], x)), 0.5))
        return false;
      pattern.push_back(*hi);
      result = g.nodes[*m1].outputs[0];
    }
    if (g.tensor(result).shape != g.tensor(x).shape) return false;  // x broadcast by a factor
    Node gelu;
    gelu.name = unique_node_name(g, rw.new_names, erf.name + "/Gelu");
    gelu.op_type = "Gelu";
    gelu.inputs = {x};
    gelu.outputs = {result};
    rw.replace(pattern, {gelu});
    return true;
  });
}

int fuse_weight_gemm(Graph& g) {
  return run_pass(g, [&](size_t mi, const Uses& uses, Rewrite& rw) {
    const Node& mm = g.nodes[mi];
    if (mm.op_type != "MatMul" || mm.inputs.size() != 2 || !mm.has_output(0) || rw.claimed(mi) ||
        mm.has_attr("transA") || mm.has_attr("transB"))
      return false;
    const std::string a = mm.inputs[0];
    if (!g.has_tensor(a) || g.tensor(a).dtype != DType::kF32 || g.tensor(a).shape.size() < 2)
      return false;
    std::vector<size_t> pattern = {mi};
    // The weight: a 2-D value, or the transpose of one read by this MatMul alone.
    std::string w = mm.inputs[1];
    int64_t trans_b = 0;
    if (auto ti = uses.producer(w); ti && g.nodes[*ti].op_type == "Transpose" && !rw.claimed(*ti)) {
      const Node& t = g.nodes[*ti];
      const std::vector<int64_t> perm = t.attr_ints("perm", {1, 0});
      const Tensor* v = t.has_input(0) ? g.value(t.inputs[0]) : nullptr;
      if (!v || v->rank() != 2 || perm != std::vector<int64_t>{1, 0} || !uses.only_reader(w, mi))
        return false;
      w = t.inputs[0];
      trans_b = 1;
      pattern.push_back(*ti);
    }
    const Tensor* wv = g.value(w);
    if (!wv || wv->rank() != 2 || wv->dtype() != DType::kF32) return false;
    const int64_t k = wv->shape()[trans_b ? 1 : 0], n = wv->shape()[trans_b ? 0 : 1];
    if (g.tensor(a).shape.back() != k) return false;
    // A bias value of shape (N) added to the product alone.
    std::string bias, result = mm.outputs[0];
    if (auto ai = uses.sole_reader(mm.outputs[0]); ai && !rw.claimed(*ai)) {
      const Node& add = g.nodes[*ai];
      const std::string b = add.op_type == "Add" ? other_input(add, mm.outputs[0]) : "";
      const Tensor* bv = b.empty() ? nullptr : g.value(b);
      if (bv && bv->dtype() == DType::kF32 &&
          (bv->shape() == Shape{n} || bv->shape() == Shape{1, n}) && add.has_output(0) &&
          g.tensor(add.outputs[0]).shape == g.tensor(mm.outputs[0]).shape) {
        bias = b;
        result = add.outputs[0];
        pattern.push_back(*ai);
      }
    }
    if (!trans_b && bias.empty()) return false;  // a plain MatMul already is one GEMM
    const Shape a_shape = g.tensor(a).shape, y_shape = g.tensor(result).shape;
    const int64_t rows = numel(a_shape) / k;
    std::vector<Node> nodes;
    auto add_node = [&](const std::string& suffix, const std::string& op,
                        std::vector<std::string> ins, const std::string& out) {
      Node n;
      n.name = unique_node_name(g, rw.new_names, mm.name + suffix);
      rw.new_names.insert(n.name);
      n.op_type = op;
      n.inputs = std::move(ins);
      n.outputs = {out};
      nodes.push_back(std::move(n));
      return &nodes.back();
    };
    std::string a_rows = a, y_rows = result;
    if (a_shape.size() != 2) {
      // Rows in and out through views: Reshape shares the buffer.
      const std::string in_shape = unique_tensor_name(g, mm.name + "/rows_shape");
      g.set_value(in_shape, Tensor::from_i64({rows, k}, {2}), Role::kConstant);
      a_rows = unique_tensor_name(g, mm.name + "/rows");
      g.set_tensor({a_rows, DType::kF32, {rows, k}, Role::kActivation});
      add_node("/Rows", "Reshape", {a, in_shape}, a_rows);
      y_rows = unique_tensor_name(g, mm.name + "/gemm_rows");
      g.set_tensor({y_rows, DType::kF32, {rows, n}, Role::kActivation});
    }
    std::vector<std::string> gemm_in = {a_rows, w};
    if (!bias.empty()) gemm_in.push_back(bias);
    Node* gemm = add_node("/Gemm", "Gemm", gemm_in, y_rows);
    gemm->attrs["transB"] = Attribute(trans_b);
    if (a_shape.size() != 2) {
      const std::string out_shape = unique_tensor_name(g, mm.name + "/out_shape");
      g.set_value(out_shape,
                  Tensor::from_i64(std::vector<int64_t>(y_shape.begin(), y_shape.end()),
                                   {static_cast<int64_t>(y_shape.size())}),
                  Role::kConstant);
      add_node("/Unrows", "Reshape", {y_rows, out_shape}, result);
    }
    rw.replace(pattern, std::move(nodes));
    return true;
  });
}

int drop_idle_dropout(Graph& g) {
  return run_pass(g, [&](size_t i, const Uses& uses, Rewrite& rw) {
    const Node& d = g.nodes[i];
    if (d.op_type != "Dropout" || !d.has_input(0) || !d.has_output(0)) return false;
    if (d.has_output(1) && (uses.outputs.count(d.outputs[1]) || uses.consumers.count(d.outputs[1])))
      return false;  // someone reads the mask
    const bool no_ratio = d.has_input(1) && scalar(g, d.inputs[1]) == 0.0f;
    const Tensor* mode = d.has_input(2) ? g.value(d.inputs[2]) : nullptr;
    const bool not_training = mode && mode->numel() == 1 && mode->dtype() == DType::kBool &&
                              !*static_cast<const bool*>(mode->raw());
    if (!no_ratio && !not_training) return false;
    if (!uses.outputs.count(d.outputs[0])) {
      rw.alias[d.outputs[0]] = d.inputs[0];  // readers read the input itself
      rw.dead.insert(i);
      return true;
    }
    Node id;  // a graph output keeps its name
    id.name = unique_node_name(g, rw.new_names, d.name + "/Identity");
    id.op_type = "Identity";
    id.inputs = {d.inputs[0]};
    id.outputs = {d.outputs[0]};
    rw.replace({i}, {id});
    return true;
  });
}

namespace {

// The fusions of a residual Add and a ReLU into the `op` before them (Conv:
// the residual in input slot 3, after the optional bias; BatchNormalization:
// slot 5, after the statistics). `n` may take them: f32 output 0, no
// activation or residual yet.
bool can_take_epilogue(const Graph& g, const Node& n, const std::string& op, size_t slot) {
  return n.op_type == op && n.has_output(0) && !n.has_attr("activation") && !n.has_input(slot) &&
         g.tensor(n.outputs[0]).dtype == DType::kF32;
}

int fuse_relu_into(Graph& g, const std::string& op, size_t slot) {
  return run_pass(g, [&](size_t ni, const Uses& uses, Rewrite& rw) {
    const Node& n = g.nodes[ni];
    if (!can_take_epilogue(g, n, op, slot)) return false;
    auto ri = uses.sole_reader(n.outputs[0]);
    if (!ri || rw.claimed(*ri)) return false;
    const Node& relu = g.nodes[*ri];
    if (relu.op_type != "Relu" || !relu.has_output(0)) return false;
    Node fused = n;
    fused.name = unique_node_name(g, rw.new_names, n.name + "/Relu");
    fused.attrs["activation"] = Attribute(std::string("Relu"));
    fused.outputs[0] = relu.outputs[0];
    rw.replace({ni, *ri}, {fused});
    return true;
  });
}

int fuse_add_into(Graph& g, const std::string& op, size_t slot) {
  return run_pass(g, [&](size_t ni, const Uses& uses, Rewrite& rw) {
    const Node& n = g.nodes[ni];
    if (!can_take_epilogue(g, n, op, slot)) return false;
    const TensorDesc& y = g.tensor(n.outputs[0]);
    auto ai = uses.sole_reader(n.outputs[0]);
    if (!ai || rw.claimed(*ai)) return false;
    const Node& add = g.nodes[*ai];
    const std::string r = other_input(add, n.outputs[0]);
    // The residual: another tensor of Y's shape (no broadcast, not Y itself).
    if (add.op_type != "Add" || !add.has_output(0) || r.empty() || r == n.outputs[0] ||
        !g.has_tensor(r) || g.tensor(r).shape != y.shape || g.tensor(r).dtype != DType::kF32)
      return false;
    Node fused = n;
    fused.inputs.resize(slot);  // a Conv's bias slot stays, empty when it has none
    fused.inputs.push_back(r);
    fused.name = unique_node_name(g, rw.new_names, n.name + "/Add");
    std::vector<size_t> pattern = {ni, *ai};
    fused.outputs[0] = add.outputs[0];
    auto ri = uses.sole_reader(add.outputs[0]);
    if (ri && !rw.claimed(*ri) && g.nodes[*ri].op_type == "Relu" && g.nodes[*ri].has_output(0)) {
      fused.name = unique_node_name(g, rw.new_names, fused.name + "/Relu");
      fused.attrs["activation"] = Attribute(std::string("Relu"));
      fused.outputs[0] = g.nodes[*ri].outputs[0];
      pattern.push_back(*ri);
    }
    rw.replace(pattern, {fused});
    return true;
  });
}

}  // namespace

int fuse_conv_relu(Graph& g) {
  return fuse_relu_into(g, "Conv", 3);
}
int fuse_conv_add(Graph& g) {
  return fuse_add_into(g, "Conv", 3);
}
int fuse_gemm_relu(Graph& g) {
  return fuse_relu_into(g, "Gemm", 3);  // no residual: input 3 is never there
}
int fuse_batchnorm_relu(Graph& g) {
  return fuse_relu_into(g, "BatchNormalization", 5);
}
int fuse_batchnorm_add(Graph& g) {
  return fuse_add_into(g, "BatchNormalization", 5);
}

int fold_conv_batchnorm(Graph& g) {
  return run_pass(g, [&](size_t ci, const Uses& uses, Rewrite& rw) {
    const Node& conv = g.nodes[ci];
    if (conv.op_type != "Conv" || !conv.has_output(0) || conv.has_attr("activation") ||
        conv.inputs.size() < 2 || conv.has_input(3))
      return false;
    const Tensor* w = g.value(conv.inputs[1]);
    const Tensor* b = conv.has_input(2) ? g.value(conv.inputs[2]) : nullptr;
    if (!w || w->dtype() != DType::kF32 || w->rank() < 3 || (conv.has_input(2) && !b)) return false;
    const int64_t m_out = w->shape()[0];
    auto bi = uses.sole_reader(conv.outputs[0]);
    if (!bi || rw.claimed(*bi)) return false;
    const Node& bn = g.nodes[*bi];
    if (bn.op_type != "BatchNormalization" || bn.attr_int("training_mode", 0) != 0 ||
        bn.inputs.size() < 5 || bn.inputs[0] != conv.outputs[0] || !bn.has_output(0) ||
        bn.has_output(1) || bn.has_output(2))
      return false;
    std::vector<const Tensor*> stats;  // scale, B, mean, var
    for (size_t i = 1; i < 5; ++i) {
      const Tensor* v = g.value(bn.inputs[i]);
      if (!v || v->dtype() != DType::kF32 || v->shape() != Shape{m_out}) return false;
      stats.push_back(v);
    }
    if (b && (b->dtype() != DType::kF32 || b->shape() != Shape{m_out})) return false;
    const double eps = bn.attr_float("epsilon", 1e-5f);
    Tensor wf(DType::kF32, w->shape()), bf(DType::kF32, {m_out});
    const int64_t per_channel = m_out == 0 ? 0 : w->numel() / m_out;
    for (int64_t m = 0; m < m_out; ++m) {
      const double a = static_cast<double>(stats[0]->data<float>()[m]) /
                       std::sqrt(static_cast<double>(stats[3]->data<float>()[m]) + eps);
      for (int64_t i = 0; i < per_channel; ++i)
        wf.data<float>()[m * per_channel + i] =
            static_cast<float>(w->data<float>()[m * per_channel + i] * a);
      const double bias = b ? b->data<float>()[m] : 0.0;
      bf.data<float>()[m] =
          static_cast<float>((bias - stats[2]->data<float>()[m]) * a + stats[1]->data<float>()[m]);
    }
    Node fused = conv;
    fused.name = unique_node_name(g, rw.new_names, conv.name + "/BatchNormalization");
    const std::string wn = unique_tensor_name(g, conv.inputs[1] + "/bn_folded");
    g.set_value(wn, std::move(wf), Role::kConstant);
    const std::string bn_bias = unique_tensor_name(g, bn.inputs[2] + "/bn_folded");
    g.set_value(bn_bias, std::move(bf), Role::kConstant);
    fused.inputs = {conv.inputs[0], wn, bn_bias};
    // A BatchNorm already fused with its residual and ReLU hands them on.
    if (bn.has_input(5)) fused.inputs.push_back(bn.inputs[5]);
    if (bn.has_attr("activation")) fused.attrs["activation"] = bn.attrs.at("activation");
    fused.outputs = {bn.outputs[0]};
    rw.replace({ci, *bi}, {fused});
    return true;
  });
}

int split_fused_epilogues(Graph& g) {
  // The unfused name: the pass appended "/Add" and "/Relu" to it.
  auto strip = [](std::string name, const std::string& suffix) {
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      name.resize(name.size() - suffix.size());
    return name;
  };
  const std::map<std::string, size_t> producers = g.producers();
  std::set<std::string> taken;
  // before[k]: nodes placed before the node at k; at[k]: what replaces it.
  std::vector<std::vector<Node>> before(g.nodes.size()), at(g.nodes.size());
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const size_t slot = n.op_type == "Conv" || n.op_type == "Gemm" ? 3
                        : n.op_type == "BatchNormalization"        ? 5
                                                                   : 0;
    const bool relu = n.attr_string("activation", "") == "Relu";
    if (slot == 0 || !n.has_output(0) || (!relu && !n.has_input(slot))) {
      at[i].push_back(n);
      continue;
    }
    ++count;
    const TensorDesc y = g.tensor(n.outputs[0]);
    Node base = n;
    base.attrs.erase("activation");
    base.inputs.resize(std::min(base.inputs.size(), slot));
    while (!base.inputs.empty() && base.inputs.back().empty()) base.inputs.pop_back();
    base.name = relu ? strip(base.name, "/Relu") : base.name;
    base.name = n.has_input(slot) ? strip(base.name, "/Add") : base.name;
    auto intermediate = [&](const std::string& what) {
      const std::string t = unique_tensor_name(g, y.name + "/" + what);
      g.set_tensor({t, y.dtype, y.shape, Role::kActivation});
      return t;
    };
    std::vector<Node>& tail = at[i];
    std::string last = base.name, out = y.name;
    if (n.has_input(slot)) {
      // Not base + "/Add": fusing again names the fused node so.
      last = unique_node_name(g, taken, base.name + "/Sum");
      base.outputs[0] = intermediate(n.op_type);
      tail.push_back({last, "Add", {base.outputs[0], n.inputs[slot]}, {y.name}, {}});
      taken.insert(last);
    }
    if (relu) {
      const std::string pre = intermediate(tail.empty() ? n.op_type : "Add");
      (tail.empty() ? base.outputs[0] : tail.back().outputs[0]) = pre;
      const std::string name = unique_node_name(g, taken, last + "/Activation");
      tail.push_back({name, "Relu", {pre}, {y.name}, {}});
      taken.insert(name);
    }
    // The node where the file had it: right after what it reads (the fusion
    // moved it to its Add, after the residual's producer, which may be
    // another Conv that would then take the Add when fused again).
    size_t from = 0;
    for (const auto& in : base.inputs)
      if (auto p = producers.find(in); !in.empty() && p != producers.end())
        from = std::max(from, p->second + 1);
    (from < i ? before[from] : tail).insert(from < i ? before[from].end() : tail.begin(), base);
  }
  if (count == 0) return 0;
  std::vector<Node> nodes;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (auto& n : before[k]) nodes.push_back(std::move(n));
    for (auto& n : at[k]) nodes.push_back(std::move(n));
  }
  g.nodes = std::move(nodes);
  g.layers.clear();  // node indices moved; the importer assigns layers afterwards
  return count;
}

FusionCounts fuse(Graph& g, bool inference) {
  FusionCounts c;
  // Dropout first: an idle one between a GEMM and its bias or inside a GELU
  // would hide the pattern.
  c.idle_dropout = drop_idle_dropout(g);
  c.attention = fuse_attention(g);
  c.gelu = fuse_gelu(g);
  c.weight_gemm = fuse_weight_gemm(g);
  if (inference) c.conv_batchnorm = fold_conv_batchnorm(g);
  c.conv_add = fuse_conv_add(g);
  c.conv_relu = fuse_conv_relu(g);
  c.batchnorm_add = fuse_batchnorm_add(g);
  c.batchnorm_relu = fuse_batchnorm_relu(g);
  // Training keeps a Gemm's ReLU as a layer of its own: an MLP's layers are
  // what its stages and interleaved chunks are cut from, and fusing saved
  // nothing measurable there (ReLU and its gradient 0.15 of an 82 ms step).
  if (inference) c.gemm_relu = fuse_gemm_relu(g);
  return c;
}

}  // namespace pipetrain::ir::passes
