// The import-time expansions of op_expansions.h, each after the operator's
// definition in the ONNX specification.
#include "importer/op_expansions.h"

#include "importer/expansion_builder.h"

namespace pipetrain::importer {

namespace {

using Builder = ExpansionBuilder;

/// The spatial axes 2.. of an (N, C, D...) input.
std::vector<int64_t> spatial_axes(size_t rank) {
  std::vector<int64_t> axes;
  for (size_t d = 2; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  return axes;
}

/// (N, C, H, W) and the block size b of DepthToSpace / SpaceToDepth.
void block_geometry(Builder& b, const ir::Node& n, ir::Shape* x, int64_t* block) {
  *x = b.shape(0);
  *block = n.attr_int("blocksize", 0);
  if (x->size() != 4) b.fail("input " + ir::shape_str(*x) + " is not 4-D (N, C, H, W)");
  if (*block < 1) b.fail("blocksize " + std::to_string(*block) + " is not positive");
}

// Reshape, Transpose, Reshape; DCR (the default) reads depth as (b, b, C'),
// CRD as (C', b, b).
std::vector<ir::Node> depth_to_space(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  ir::Shape x;
  int64_t k;
  block_geometry(b, n, &x, &k);
  if (x[1] % (k * k) != 0)
    b.fail(std::to_string(x[1]) + " channels do not split into blocks of " + std::to_string(k) +
           " x " + std::to_string(k));
  const int64_t c = x[1] / (k * k);
  const bool crd = n.attr_string("mode", "DCR") == "CRD";
  if (!crd && n.attr_string("mode", "DCR") != "DCR")
    b.fail("mode '" + n.attr_string("mode", "") + "' (DCR or CRD)");
  std::string s =
      b.op("Reshape", {n.inputs[0], b.ints(crd ? std::vector<int64_t>{x[0], c, k, k, x[2], x[3]}
                                               : std::vector<int64_t>{x[0], k, k, c, x[2], x[3]})});
  s = b.op("Transpose", {s},
           {{"perm", ir::Attribute(crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3}
                                       : std::vector<int64_t>{0, 3, 4, 1, 5, 2})}});
  b.op("Reshape", {s, b.ints({x[0], c, x[2] * k, x[3] * k})}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

std::vector<ir::Node> space_to_depth(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  ir::Shape x;
  int64_t k;
  block_geometry(b, n, &x, &k);
  if (x[2] % k != 0 || x[3] % k != 0)
    b.fail("spatial size " + ir::shape_str(x) + " does not split into blocks of " +
           std::to_string(k));
  std::string s = b.op("Reshape", {n.inputs[0], b.ints({x[0], x[1], x[2] / k, k, x[3] / k, k})});
  s = b.op("Transpose", {s}, {{"perm", ir::Attribute(std::vector<int64_t>{0, 3, 5, 1, 2, 4})}});
  b.op("Reshape", {s, b.ints({x[0], x[1] * k * k, x[2] / k, x[3] / k})}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

// y = scale (x - mean) / sqrt(var + epsilon) + B, statistics per (n, c) over the spatial axes.
std::vector<ir::Node> instance_norm(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const ir::Shape& x = b.shape(0);
  if (x.size() < 3) b.fail("input " + ir::shape_str(x) + " has no spatial axes");
  for (size_t i : {1, 2})
    if (b.shape(i) != ir::Shape{x[1]})
      b.fail("input " + std::to_string(i) + " " + ir::shape_str(b.shape(i)) + " is not (" +
             std::to_string(x[1]) + ")");
  const ir::Attribute axes(spatial_axes(x.size())), keep(int64_t{1});
  ir::Shape per_channel(x.size() - 1, 1);
  per_channel[0] = x[1];
  const std::string mean = b.op("ReduceMean", {n.inputs[0]}, {{"axes", axes}, {"keepdims", keep}});
  const std::string d = b.op("Sub", {n.inputs[0], mean});
  const std::string var =
      b.op("ReduceMean", {b.op("Mul", {d, d})}, {{"axes", axes}, {"keepdims", keep}});
  const std::string inv =
      b.op("Sqrt", {b.op("Add", {var, b.scalar(n.attr_float("epsilon", 1e-5f))})});
  const std::string scale = b.op("Reshape", {n.inputs[1], b.ints(per_channel)});
  const std::string bias = b.op("Reshape", {n.inputs[2], b.ints(per_channel)});
  b.op("Add", {b.op("Mul", {b.op("Div", {d, inv}), scale}), bias}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

// y = (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes` (default 0, 2, 3), ONNX's body.
std::vector<ir::Node> mean_variance_norm(ir::Graph& g, const ir::Node& n,
                                         std::set<std::string>& t) {
  Builder b(g, n, t);
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (!n.has_attr("axes")) axes = {0, 2, 3};
  const ir::Attribute ax(axes), keep(int64_t{1});
  const std::string x = n.inputs[0];
  const std::string mean = b.op("ReduceMean", {x}, {{"axes", ax}, {"keepdims", keep}});
  const std::string mean_sq =
      b.op("ReduceMean", {b.op("Mul", {x, x})}, {{"axes", ax}, {"keepdims", keep}});
  const std::string var = b.op("Sub", {mean_sq, b.op("Mul", {mean, mean})});
  const std::string std_eps = b.op("Add", {b.op("Sqrt", {var}), b.scalar(1e-9f)});
  b.op("Div", {b.op("Sub", {x, mean}), std_eps}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

// y = x / ||x||_p along `axis` (p = 1 or 2).
std::vector<ir::Node> lp_norm(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const int64_t p = n.attr_int("p", 2);
  if (p != 1 && p != 2) b.fail("p = " + std::to_string(p) + " (1 or 2)");
  const ir::Attribute axes(std::vector<int64_t>{n.attr_int("axis", -1)});
  const std::string norm = b.op(p == 1 ? "ReduceL1" : "ReduceL2", {n.inputs[0]},
                                {{"axes", axes}, {"keepdims", ir::Attribute(int64_t{1})}});
  b.op("Div", {n.inputs[0], norm}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

// The maximum over the spatial axes, kept as 1s.
std::vector<ir::Node> global_max_pool(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const ir::Shape& x = b.shape(0);
  if (x.size() < 3) b.fail("input " + ir::shape_str(x) + " has no spatial axes");
  b.op("ReduceMax", {n.inputs[0]},
       {{"axes", ir::Attribute(spatial_axes(x.size()))}, {"keepdims", ir::Attribute(int64_t{1})}},
       n.outputs[0]);
  return std::move(b.nodes);
}

}  // namespace

const std::map<std::string, Expansion>& expanded_ops() {
  static const std::map<std::string, Expansion> ops = {
      {"DepthToSpace", {"Reshape, Transpose, Reshape", depth_to_space}},
      {"SpaceToDepth", {"Reshape, Transpose, Reshape", space_to_depth}},
      {"InstanceNormalization", {"ReduceMean, Sub, Mul, Add, Sqrt, Div, Reshape", instance_norm}},
      {"MeanVarianceNormalization", {"ReduceMean, Mul, Sub, Sqrt, Add, Div", mean_variance_norm}},
      {"LpNormalization", {"ReduceL1 or ReduceL2, Div", lp_norm}},
      {"GlobalMaxPool", {"ReduceMax", global_max_pool}},
      {"GRU", {"unrolled: MatMul, Add, Sigmoid, Tanh, Mul, Sub, Slice, Concat", detail::expand_gru}},
      {"Einsum", {"Transpose, Reshape, MatMul, Mul, ReduceSum", detail::expand_einsum}},
      {"RNN", {"unrolled: MatMul, Add, Tanh, Slice, Concat", detail::expand_rnn}},
  };
  return ops;
}

}  // namespace pipetrain::importer
