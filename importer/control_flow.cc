// If, Loop and Scan at import: a body runs inline, its tensors renamed under
// the node's name. If takes the branch its constant condition names; Loop is
// unrolled over its constant trip count (a counted loop: the body's
// condition must pass the loop's own through); Scan over the static length
// of its scan inputs. A dynamic condition or trip count is refused naming the
// node. The body travels in the IR node as its serialized GraphProto
// (onnx_reader.cc), its outer-scope reads appended to the node's inputs.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <set>

#include "importer/expansion_builder.h"
#include "importer/internal.h"
#include "importer/op_expansions.h"

namespace pipetrain::importer::detail {

namespace {

using ir::Attribute;

/// Bodies larger than this many nodes once unrolled are refused.
constexpr int64_t kMaxUnrolledNodes = 200000;

onnx::GraphProto body_of(const ExpansionBuilder& b, const ir::Node& n, const std::string& key) {
  if (!n.has_attr(key) || ir::attr_type(n.attrs.at(key)) != ir::AttrType::kString)
    b.fail("has no '" + key + "' body");
  onnx::GraphProto body;
  if (!body.ParseFromString(n.attr_string(key, "")))
    b.fail("its '" + key + "' body is not a valid GraphProto");
  return body;
}

/// Renames the reads of a nested body (at any depth) that `rename` maps.
void rename_reads(onnx::GraphProto* body, const std::map<std::string, std::string>& rename) {
  auto mapped = [&](const std::string& s) {
    auto it = rename.find(s);
    return it == rename.end() ? s : it->second;
  };
  for (auto& np : *body->mutable_node()) {
    for (auto& in : *np.mutable_input()) in = mapped(in);
    for (auto& a : *np.mutable_attribute())
      if (a.type() == onnx::AttributeProto::GRAPH) rename_reads(a.mutable_g(), rename);
  }
  for (auto& o : *body->mutable_output()) o.set_name(mapped(o.name()));
}

/// Appends `body` to b's nodes with its inputs bound to `bound`; every name
/// it defines gets a fresh name under `prefix`. Returns its outputs' names.
std::vector<std::string> inline_body(ExpansionBuilder& b, const onnx::GraphProto& body,
                                     const std::vector<std::string>& bound,
                                     const std::string& prefix) {
  if (body.input_size() != static_cast<int>(bound.size()))
    b.fail("its body takes " + std::to_string(body.input_size()) + " inputs, " +
           std::to_string(bound.size()) + " are given");
  const auto names = node_names(body);
  check_ops_supported(body, names);
  std::map<std::string, std::string> rename;
  for (size_t i = 0; i < bound.size(); ++i)
    rename[body.input(static_cast<int>(i)).name()] = bound[i];
  for (const auto& init : body.initializer())
    rename[init.name()] =
        b.constant(tensor_from_proto(init, "", "body initializer '" + init.name() + "'"));
  for (int i = 0; i < body.node_size(); ++i) {
    const onnx::NodeProto& np = body.node(i);
    ir::Node n;
    n.name = b.fresh(prefix + names[static_cast<size_t>(i)]);
    n.op_type = np.op_type();
    if (np.op_type() == "Constant") {
      if (np.output_size() != 1)
        b.fail("a Constant in its body has " + std::to_string(np.output_size()) + " outputs");
      rename[np.output(0)] = b.constant(constant_node_value(np, n.describe(), ""));
      continue;
    }
    onnx::NodeProto renamed = np;
    for (auto& a : *renamed.mutable_attribute())
      if (a.type() == onnx::AttributeProto::GRAPH) rename_reads(a.mutable_g(), rename);
    fill_node(renamed, "", &n);
    for (auto& in : n.inputs)
      if (auto it = rename.find(in); it != rename.end()) in = it->second;
    for (auto& out : n.outputs) {
      if (out.empty()) continue;
      const std::string fresh = b.fresh(prefix + out);
      rename[out] = fresh;
      out = fresh;
    }
    b.nodes.push_back(std::move(n));
  }
  std::vector<std::string> outs;
  for (const auto& o : body.output()) {
    auto it = rename.find(o.name());
    outs.push_back(it == rename.end() ? o.name() : it->second);
  }
  return outs;
}

/// Refusing a dynamic or unsupported form: UnsupportedOp naming the node.
[[noreturn]] void refuse(const ir::Node& n, const std::string& why) {
  throw UnsupportedOp(n.describe() + ": " + why);
}

/// Input i as a constant of one element, or nothing if it is not a constant.
const ir::Tensor* scalar_constant(const ExpansionBuilder& b, const ir::Node& n, size_t i,
                                  const std::string& what) {
  const ir::Tensor* v = b.graph().value(n.inputs[i]);
  if (v && v->numel() != 1)
    b.fail(what + " has " + std::to_string(v->numel()) + " elements, not 1");
  return v;
}

std::string iteration_name(int64_t t) {
  return "iter" + std::to_string(t) + "/";
}

void check_unrolled_size(const ExpansionBuilder& b, int64_t trips, const onnx::GraphProto& body) {
  if (trips * std::max(1, body.node_size()) > kMaxUnrolledNodes)
    b.fail(std::to_string(trips) + " iterations of a " + std::to_string(body.node_size()) +
           "-node body are over the " + std::to_string(kMaxUnrolledNodes) +
           " nodes pipetrain unrolls");
}

/// Whether a Loop body's condition output is its condition input passed
/// through (directly or by Identity) or a constant true: a counted loop.
bool condition_passes_through(const onnx::GraphProto& body) {
  const std::string out = body.output(0).name(), in = body.input(1).name();
  if (out == in) return true;
  for (const auto& init : body.initializer())
    if (init.name() == out) return false;  // conservative: a body initializer condition
  for (const auto& np : body.node()) {
    if (np.output_size() < 1 || np.output(0) != out) continue;
    if (np.op_type() == "Identity" && np.input_size() == 1 && np.input(0) == in) return true;
    if (np.op_type() == "Constant") {
      const ir::Tensor v = constant_node_value(np, "Constant", "");
      return v.numel() == 1 && v.to_i64().at(0) != 0;
    }
  }
  return false;
}

/// The values of `parts` stacked along a new axis.
std::string stack(ExpansionBuilder& b, const std::vector<std::string>& parts, int64_t axis,
                  const std::string& out) {
  std::vector<std::string> expanded;
  for (const auto& p : parts) expanded.push_back(b.op("Unsqueeze", {p, b.ints({axis})}));
  return b.concat(expanded, axis, out);
}

}  // namespace

std::vector<ir::Node> expand_if(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken) {
  ExpansionBuilder b(g, n, taken);
  const ir::Tensor* cond = scalar_constant(b, n, 0, "the condition");
  if (!cond)
    refuse(n, "the condition '" + n.inputs[0] +
                  "' is not a constant: pipetrain takes one branch at import (static graphs only)");
  const bool then = cond->to_i64().at(0) != 0;
  const onnx::GraphProto body = body_of(b, n, then ? "then_branch" : "else_branch");
  const auto outs = inline_body(b, body, {}, then ? "then/" : "else/");
  if (outs.size() != n.outputs.size())
    b.fail("its branch has " + std::to_string(outs.size()) + " outputs, the node " +
           std::to_string(n.outputs.size()));
  for (size_t k = 0; k < outs.size(); ++k)
    if (!n.outputs[k].empty()) b.op("Identity", {outs[k]}, {}, n.outputs[k]);
  return std::move(b.nodes);
}

std::vector<ir::Node> expand_loop(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken) {
  ExpansionBuilder b(g, n, taken);
  const onnx::GraphProto body = body_of(b, n, "body");
  if (body.input_size() < 2 || body.output_size() < body.input_size() - 1)
    b.fail("its body has " + std::to_string(body.input_size()) + " inputs and " +
           std::to_string(body.output_size()) + " outputs");
  const size_t carried = static_cast<size_t>(body.input_size() - 2);
  if (n.inputs.size() < 2 + carried)
    b.fail("has " + std::to_string(n.inputs.size()) + " inputs for " + std::to_string(carried) +
           " loop-carried values");
  const size_t scans = static_cast<size_t>(body.output_size()) - 1 - carried;
  int64_t trips = -1;
  if (n.has_input(0)) {
    const ir::Tensor* m = scalar_constant(b, n, 0, "the trip count");
    if (!m)
      refuse(n, "the trip count '" + n.inputs[0] +
                    "' is not a constant: pipetrain unrolls loops at import (static graphs only)");
    trips = std::max<int64_t>(0, m->to_i64().at(0));
  }
  if (n.has_input(1)) {
    const ir::Tensor* c = scalar_constant(b, n, 1, "the condition");
    if (!c) refuse(n, "the condition '" + n.inputs[1] + "' is not a constant (static graphs only)");
    if (c->to_i64().at(0) == 0)
      trips = 0;
    else if (!condition_passes_through(body))
      refuse(n,
             "its body computes the loop condition: only counted loops (a constant trip count, "
             "the condition passed through) unroll at import");
  }
  if (trips < 0) refuse(n, "has no trip count: a while loop cannot be unrolled at import");
  if (trips == 0 && scans > 0)
    b.fail("runs no iteration, so its scan outputs have no static shape");
  check_unrolled_size(b, trips, body);
  std::vector<std::string> state(n.inputs.begin() + 2,
                                 n.inputs.begin() + 2 + static_cast<int64_t>(carried));
  std::vector<std::vector<std::string>> scan_parts(scans);
  ir::Tensor yes(ir::DType::kBool, {});
  yes.data<uint8_t>()[0] = 1;
  const std::string cond_true = b.constant(yes);
  for (int64_t t = 0; t < trips; ++t) {
    std::vector<std::string> bound = {b.constant(ir::Tensor::from_i64({t}, {})), cond_true};
    bound.insert(bound.end(), state.begin(), state.end());
    const auto outs = inline_body(b, body, bound, iteration_name(t));
    std::copy(outs.begin() + 1, outs.begin() + 1 + static_cast<int64_t>(carried), state.begin());
    for (size_t k = 0; k < scans; ++k) scan_parts[k].push_back(outs[1 + carried + k]);
  }
  for (size_t i = 0; i < carried; ++i)
    if (i < n.outputs.size() && !n.outputs[i].empty())
      b.op("Identity", {state[i]}, {}, n.outputs[i]);
  for (size_t k = 0; k < scans; ++k)
    if (carried + k < n.outputs.size() && !n.outputs[carried + k].empty())
      stack(b, scan_parts[k], 0, n.outputs[carried + k]);
  return std::move(b.nodes);
}

namespace {

/// How many outer-scope names `body` reads (the reader appends them to the
/// node's inputs).
int64_t outer_read_count(const onnx::GraphProto& body) {
  std::set<std::string> defined, outer;
  for (const auto& in : body.input()) defined.insert(in.name());
  for (const auto& init : body.initializer()) defined.insert(init.name());
  for (const auto& np : body.node())
    for (const auto& o : np.output()) defined.insert(o);
  for (const auto& np : body.node())
    for (const auto& in : np.input())
      if (!in.empty() && !defined.count(in)) outer.insert(in);
  return static_cast<int64_t>(outer.size());
}

/// Scan before opset 9: an optional sequence_lens, then states (B, ...) and
/// scan inputs (B, T, ...) batched on axis 0, directions per scan input, scan
/// outputs (B, T, ...). libonnx's 8-to-9 adapter only renames `directions` and
/// drops an empty sequence_lens, leaving the data batched. Each batch entry is
/// the later Scan unrolled over T on its own slice; sequence_lens must be
/// absent or a constant T for every entry.
std::vector<ir::Node> expand_batched_scan(ExpansionBuilder& b, const ir::Node& n) {
  const onnx::GraphProto body = body_of(b, n, "body");
  const int64_t m = n.attr_int("num_scan_inputs", 0);
  const int64_t states = body.input_size() - m, k_out = body.output_size() - states;
  const int64_t own = static_cast<int64_t>(n.inputs.size()) - outer_read_count(body);
  if (m < 1 || states < 0 || k_out < 0 || (own != states + m && own != 1 + states + m))
    b.fail("num_scan_inputs " + std::to_string(m) + " for a body of " +
           std::to_string(body.input_size()) + " inputs and " + std::to_string(own) +
           " node inputs");
  const size_t first_state = own == states + m ? 0 : 1;  // after sequence_lens
  std::vector<int64_t> dirs =
      n.attr_ints(n.has_attr("directions") ? "directions" : "scan_input_directions");
  if (dirs.empty()) dirs.assign(static_cast<size_t>(m), 0);
  if (static_cast<int64_t>(dirs.size()) != m) b.fail("directions does not have one per scan input");
  const ir::Shape& first = b.shape(first_state + static_cast<size_t>(states));
  if (first.size() < 2) b.fail("scan input " + ir::shape_str(first) + " is not (batch, time, ...)");
  const int64_t batch = first[0], length = first[1];
  for (int64_t j = 0; j < m; ++j) {
    const ir::Shape& s = b.shape(first_state + static_cast<size_t>(states + j));
    if (s.size() < 2 || s[0] != batch || s[1] != length)
      b.fail("scan inputs " + ir::shape_str(first) + " and " + ir::shape_str(s) +
             " differ in batch or length");
  }
  if (first_state == 1 && n.has_input(0)) {
    const std::vector<int64_t> lens = b.constant_input(0, "sequence_lens").to_i64();
    for (int64_t len : lens)
      if (len != length)
        refuse(n, "sequence_lens " + std::to_string(len) + " shorter than the scan length " +
                      std::to_string(length) + " (only full-length batched scans unroll)");
  }
  if (length == 0 && k_out > 0)
    b.fail("scans an empty sequence, so its outputs have no static shape");
  check_unrolled_size(b, batch * length, body);
  auto entry = [&](const std::string& x, int64_t i) {  // x[i], without the batch axis
    return b.op("Squeeze",
                {b.op("Slice", {x, b.ints({i}), b.ints({i + 1}), b.ints({0})}), b.ints({0})});
  };
  std::vector<std::vector<std::string>> final_states(static_cast<size_t>(states)),
      outs_by_k(static_cast<size_t>(k_out));
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<std::string> state;
    for (int64_t s = 0; s < states; ++s)
      state.push_back(entry(n.inputs[first_state + static_cast<size_t>(s)], i));
    std::vector<std::string> seqs;
    for (int64_t j = 0; j < m; ++j)
      seqs.push_back(entry(n.inputs[first_state + static_cast<size_t>(states + j)], i));
    std::vector<std::vector<std::string>> steps(static_cast<size_t>(k_out));
    for (int64_t t = 0; t < length; ++t) {
      std::vector<std::string> bound = state;
      for (int64_t j = 0; j < m; ++j) {
        const int64_t at = dirs[static_cast<size_t>(j)] ? length - 1 - t : t;
        bound.push_back(entry(seqs[static_cast<size_t>(j)], at));
      }
      const auto outs = inline_body(b, body, bound, iteration_name(i * length + t));
      std::copy(outs.begin(), outs.begin() + states, state.begin());
      for (int64_t k = 0; k < k_out; ++k)
        steps[static_cast<size_t>(k)].push_back(outs[static_cast<size_t>(states + k)]);
    }
    for (int64_t s = 0; s < states; ++s)
      final_states[static_cast<size_t>(s)].push_back(state[static_cast<size_t>(s)]);
    for (int64_t k = 0; k < k_out; ++k)
      outs_by_k[static_cast<size_t>(k)].push_back(stack(b, steps[static_cast<size_t>(k)], 0, ""));
  }
  for (int64_t s = 0; s < states; ++s)
    if (n.has_output(static_cast<size_t>(s)))
      stack(b, final_states[static_cast<size_t>(s)], 0, n.outputs[static_cast<size_t>(s)]);
  for (int64_t k = 0; k < k_out; ++k)
    if (n.has_output(static_cast<size_t>(states + k)))
      stack(b, outs_by_k[static_cast<size_t>(k)], 0, n.outputs[static_cast<size_t>(states + k)]);
  return std::move(b.nodes);
}

}  // namespace

std::vector<ir::Node> expand_scan(ir::Graph& g, const ir::Node& n, std::set<std::string>& taken) {
  ExpansionBuilder b(g, n, taken);
  if (g.source_opset < 9) return expand_batched_scan(b, n);  // libonnx's converter keeps it
  const onnx::GraphProto body = body_of(b, n, "body");
  const int64_t m = n.attr_int("num_scan_inputs", 0);
  const int64_t states = body.input_size() - m;
  if (m < 1 || states < 0)
    b.fail("num_scan_inputs " + std::to_string(m) + " for a body of " +
           std::to_string(body.input_size()) + " inputs");
  const int64_t k_out = body.output_size() - states;
  if (k_out < 0) b.fail("its body has fewer outputs than states");
  auto per_input = [&](const char* key, int64_t count) {
    std::vector<int64_t> v = n.attr_ints(key);
    if (v.empty()) v.assign(static_cast<size_t>(count), 0);
    if (static_cast<int64_t>(v.size()) != count)
      b.fail(std::string(key) + " has " + std::to_string(v.size()) + " values for " +
             std::to_string(count));
    return v;
  };
  std::vector<int64_t> in_axes = per_input("scan_input_axes", m);
  const std::vector<int64_t> in_dirs = per_input("scan_input_directions", m);
  const std::vector<int64_t> out_axes = per_input("scan_output_axes", k_out);
  const std::vector<int64_t> out_dirs = per_input("scan_output_directions", k_out);
  int64_t length = -1;
  for (int64_t j = 0; j < m; ++j) {
    const ir::Shape& s = b.shape(static_cast<size_t>(states + j));
    const int64_t rank = static_cast<int64_t>(s.size());
    int64_t& a = in_axes[static_cast<size_t>(j)];
    if (a < -rank || a >= rank)
      b.fail("scan axis " + std::to_string(a) + " of a rank-" + std::to_string(rank) + " input");
    if (a < 0) a += rank;
    const int64_t len = s[static_cast<size_t>(a)];
    if (length >= 0 && len != length)
      b.fail("its scan inputs have lengths " + std::to_string(length) + " and " +
             std::to_string(len));
    length = len;
  }
  if (length == 0 && k_out > 0)
    b.fail("scans an empty sequence, so its outputs have no static shape");
  check_unrolled_size(b, length, body);
  if (static_cast<int64_t>(n.inputs.size()) < states + m)
    b.fail("has " + std::to_string(n.inputs.size()) + " inputs for " + std::to_string(states) +
           " states and " + std::to_string(m) + " scan inputs");
  std::vector<std::string> state(n.inputs.begin(), n.inputs.begin() + states);
  std::vector<std::vector<std::string>> outs_by_k(static_cast<size_t>(k_out));
  for (int64_t t = 0; t < length; ++t) {
    std::vector<std::string> bound = state;
    for (int64_t j = 0; j < m; ++j) {
      const int64_t at = in_dirs[static_cast<size_t>(j)] ? length - 1 - t : t;
      const int64_t a = in_axes[static_cast<size_t>(j)];
      const std::string x = n.inputs[static_cast<size_t>(states + j)];
      bound.push_back(
          b.op("Squeeze",
               {b.op("Slice", {x, b.ints({at}), b.ints({at + 1}), b.ints({a})}), b.ints({a})}));
    }
    const auto outs = inline_body(b, body, bound, iteration_name(t));
    std::copy(outs.begin(), outs.begin() + states, state.begin());
    for (int64_t k = 0; k < k_out; ++k)
      outs_by_k[static_cast<size_t>(k)].push_back(outs[static_cast<size_t>(states + k)]);
  }
  for (int64_t i = 0; i < states; ++i)
    if (n.has_output(static_cast<size_t>(i)))
      b.op("Identity", {state[static_cast<size_t>(i)]}, {}, n.outputs[static_cast<size_t>(i)]);
  for (int64_t k = 0; k < k_out; ++k) {
    if (!n.has_output(static_cast<size_t>(states + k))) continue;
    const std::string& out = n.outputs[static_cast<size_t>(states + k)];
    auto parts = outs_by_k[static_cast<size_t>(k)];
    if (out_dirs[static_cast<size_t>(k)]) std::reverse(parts.begin(), parts.end());
    int64_t axis = out_axes[static_cast<size_t>(k)];
    if (axis < 0) {  // counted over the stacked rank: the body output's rank + 1
      const onnx::ValueInfoProto& vi = body.output(static_cast<int>(states + k));
      if (!vi.type().tensor_type().has_shape())
        b.fail("a negative scan_output_axes needs the body output's rank");
      axis += vi.type().tensor_type().shape().dim_size() + 1;
    }
    stack(b, parts, axis, out);
  }
  return std::move(b.nodes);
}

}  // namespace pipetrain::importer::detail
