#include "ir/cost.h"

#include <algorithm>
#include <set>

namespace pipetrain::ir {

namespace {
int64_t out_numel(const Graph& g, const Node& n, size_t k = 0) {
  return n.has_output(k) ? numel(g.tensor(n.outputs[k]).shape) : 0;
}
int64_t in_numel(const Graph& g, const Node& n, size_t k) {
  return n.has_input(k) ? numel(g.tensor(n.inputs[k]).shape) : 0;
}
}  // namespace

int64_t node_flops(const Graph& g, const Node& n) {
  const std::string& op = n.op_type;
  if (op == "Conv") {
    // 2 * out elements * (C_in / group) * kernel volume
    const Shape& w = g.tensor(n.inputs[1]).shape;  // (M, C/group, k...)
    int64_t per_out = 1;
    for (size_t i = 1; i < w.size(); ++i) per_out *= w[i];
    return 2 * out_numel(g, n) * per_out;
  }
  if (op == "ConvTranspose") {
    const Shape& w = g.tensor(n.inputs[1]).shape;  // (C, M/group, k...)
    int64_t per_in = 1;
    for (size_t i = 1; i < w.size(); ++i) per_in *= w[i];
    return 2 * in_numel(g, n, 0) * per_in;
  }
  if (op == "ConvGrad" || op == "ConvTransposeGrad") {
    // (dY, X, W) -> (dX, dW, dB): dX and dW each cost the forward's FLOPs,
    // dB one add per dY element; absent outputs cost nothing.
    const Shape& w = g.tensor(n.inputs[2]).shape;
    int64_t per_elem = 1;
    for (size_t i = 1; i < w.size(); ++i) per_elem *= w[i];
    // The forward's FLOPs: per output element for Conv, per input element
    // (the forward's X) for ConvTranspose.
    int64_t forward = 2 * in_numel(g, n, op == "ConvGrad" ? 0 : 1) * per_elem;
    return forward * ((n.has_output(0) ? 1 : 0) + (n.has_output(1) ? 1 : 0)) +
           (n.has_output(2) ? in_numel(g, n, 0) : 0);
  }
  if (op == "Gemm" || op == "MatMul") {
    const Shape& a = g.tensor(n.inputs[0]).shape;
    int64_t k = a.empty() ? 1 : a.back();
    if (n.attr_int("transA", 0)) k = a[a.size() - 2];  // Gemm's A is 2-D; MatMul's is >= 2-D
    return 2 * out_numel(g, n) * k;
  }
  if (op == "Attention" || op == "AttentionGrad") {
    // (batch..., Lq, d) x (batch..., d, Lk) x (batch..., Lk, dv): the forward's
    // two products, the backward's five (the scores recomputed); ~8 flops an
    // element of the (Lq, Lk) block for softmax and dropout.
    const bool grad = op == "AttentionGrad";
    // An operand may be a column block of its input (x_shape) and stored
    // as K's rows (k_perm: Lk read from the stored axis perm[-1]).
    auto stored = [&](size_t i, const char* x) {
      const std::string key = std::string(x) + "_shape";
      return n.has_attr(key) ? Shape(n.attr_ints(key)) : g.tensor(n.inputs[i]).shape;
    };
    const Shape q = stored(grad ? 1 : 0, "q"), kt = stored(grad ? 2 : 1, "k");
    const std::vector<int64_t> kp = n.attr_ints("k_perm");
    const int64_t d = q.back(), lk = kp.empty() ? kt.back() : kt[static_cast<size_t>(kp.back())],
                  dv = stored(grad ? 3 : 2, "v").back();
    const int64_t scores = numel(q) / std::max<int64_t>(d, 1) * lk;
    return grad ? 2 * scores * (3 * d + 2 * dv) + 10 * scores : 2 * scores * (d + dv) + 8 * scores;
  }
  if (op == "LSTM") {
    const Shape& x = g.tensor(n.inputs[0]).shape;  // (T, N, I)
    const Shape& r = g.tensor(n.inputs[2]).shape;  // (D, 4H, H)
    const Shape& w = g.tensor(n.inputs[1]).shape;  // (D, 4H, I)
    int64_t steps = x[0] * x[1];
    return 2 * steps * w[0] * (w[1] * w[2] + r[1] * r[2]) + 10 * steps * r[0] * r[1];
  }
  static const std::set<std::string> kFree = {
      "Reshape", "Flatten", "Squeeze",  "Unsqueeze",       "Identity",
      "Shape",   "Size",    "Constant", "ConstantOfShape", "Transpose",
      "Concat",  "Split",   "Slice",    "Gather",          "Expand",
      "Pad",     "Cast",    "Range",    "Dropout"};
  if (kFree.count(op)) return 0;
  if (op == "MaxPool" || op == "AveragePool") {
    int64_t window = 1;
    for (int64_t k : n.attr_ints("kernel_shape")) window *= k;
    return out_numel(g, n) * window;
  }
  if (op == "GlobalAveragePool" || op.rfind("Reduce", 0) == 0) return in_numel(g, n, 0);
  if (op == "BatchNormalization" || op == "LayerNormalization" || op == "Softmax" ||
      op == "LogSoftmax" || op == "SoftmaxCrossEntropyLoss")
    return 5 * in_numel(g, n, 0);
  if (op == "Gelu" || op == "Erf") return 8 * out_numel(g, n);
  // Elementwise: one op per output element.
  return out_numel(g, n);
}

std::vector<LayerStats> layer_stats(const Graph& g) {
  std::vector<LayerStats> stats(g.layers.size());
  auto consumers = g.consumers();
  std::set<std::string> graph_outputs(g.outputs.begin(), g.outputs.end());
  for (size_t l = 0; l < g.layers.size(); ++l) {
    LayerStats& s = stats[l];
    s.name = g.layers[l].name;
    s.num_nodes = g.layers[l].nodes.size();
    std::set<std::string> params_seen;
    for (size_t idx : g.layers[l].nodes) {
      const Node& n = g.nodes[idx];
      s.flops += node_flops(g, n);
      for (const auto& in : n.inputs)
        if (!in.empty() && g.tensor(in).role == Role::kParam && params_seen.insert(in).second)
          s.params += numel(g.tensor(in).shape);
      for (const auto& out : n.outputs) {
        if (out.empty()) continue;
        bool leaves = graph_outputs.count(out) != 0;
        for (size_t c : consumers[out])
          if (g.nodes[c].layer != static_cast<int>(l)) leaves = true;
        if (leaves) s.activation_bytes += static_cast<int64_t>(g.tensor(out).nbytes());
      }
    }
  }
  return stats;
}

}  // namespace pipetrain::ir
