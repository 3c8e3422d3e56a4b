// The import-time expansions of op_expansions.h, each after the operator's
// definition in the ONNX specification.
#include "importer/op_expansions.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "importer/expansion_builder.h"
#include "importer/internal.h"

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

/// (x - mean) / sqrt(var + epsilon), the mean and (biased) variance over `axes`, kept.
std::string standardize(Builder& b, const std::string& x, std::vector<int64_t> axes, float eps) {
  const ir::Attribute over(std::move(axes)), keep(int64_t{1});
  const std::string mean = b.op("ReduceMean", {x}, {{"axes", over}, {"keepdims", keep}});
  const std::string d = b.op("Sub", {x, mean});
  const std::string var =
      b.op("ReduceMean", {b.op("Mul", {d, d})}, {{"axes", over}, {"keepdims", keep}});
  return b.op("Div", {d, b.op("Sqrt", {b.op("Add", {var, b.scalar(eps)})})});
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
  ir::Shape per_channel(x.size() - 1, 1);
  per_channel[0] = x[1];
  const std::string normed =
      standardize(b, n.inputs[0], spatial_axes(x.size()), n.attr_float("epsilon", 1e-5f));
  const std::string scale = b.op("Reshape", {n.inputs[1], b.ints(per_channel)});
  const std::string bias = b.op("Reshape", {n.inputs[2], b.ints(per_channel)});
  b.op("Add", {b.op("Mul", {normed, scale}), bias}, {}, n.outputs[0]);
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

// y = x / (bias + alpha / size * sum of x^2 over `size` neighbouring
// channels)^beta; the channel window sum is an AveragePool (zero padding
// counted) over x^2 laid out as (N, 1, C, rest), so alpha / size * sum =
// alpha * average.
std::vector<ir::Node> lrn(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const ir::Shape& x = b.shape(0);
  if (x.size() < 2) b.fail("input " + ir::shape_str(x) + " has no channel axis");
  const int64_t size = n.attr_int("size", 0);
  if (size < 1) b.fail("size " + std::to_string(size) + " is not positive");
  int64_t rest = 1;
  for (size_t d = 2; d < x.size(); ++d) rest *= x[d];
  const std::string sq = b.op("Mul", {n.inputs[0], n.inputs[0]});
  const std::string planes = b.op("Reshape", {sq, b.ints({x[0], 1, x[1], rest})});
  const std::string avg =
      b.op("AveragePool", {planes},
           {{"kernel_shape", ir::Attribute(std::vector<int64_t>{size, 1})},
            {"pads", ir::Attribute(std::vector<int64_t>{(size - 1) / 2, 0, size / 2, 0})},
            {"count_include_pad", ir::Attribute(int64_t{1})}});
  const std::string avg_x =
      b.op("Reshape", {avg, b.ints(std::vector<int64_t>(x.begin(), x.end()))});
  const std::string base =
      b.op("Add", {b.op("Mul", {avg_x, b.scalar(n.attr_float("alpha", 1e-4f))}),
                   b.scalar(n.attr_float("bias", 1.0f))});
  b.op("Div", {n.inputs[0], b.op("Pow", {base, b.scalar(n.attr_float("beta", 0.75f))})}, {},
       n.outputs[0]);
  return std::move(b.nodes);
}

// The slices along `axis` (or of the flattened input) where condition holds:
// a Gather of the constant positions.
std::vector<ir::Node> compress(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const ir::Shape& x = b.shape(0);
  const ir::Tensor& cond = b.constant_input(1, "condition");
  std::string input = n.inputs[0];
  int64_t axis = 0, dim = ir::numel(x);
  if (n.has_attr("axis")) {
    const int64_t rank = static_cast<int64_t>(x.size());
    axis = n.attr_int("axis", 0);
    if (axis < -rank || axis >= rank)
      b.fail("axis " + std::to_string(axis) + " is out of range for " + ir::shape_str(x));
    if (axis < 0) axis += rank;
    dim = x[static_cast<size_t>(axis)];
  } else {
    input = b.op("Reshape", {input, b.ints({dim})});
  }
  const std::vector<int64_t> c = cond.to_i64();
  if (static_cast<int64_t>(c.size()) > dim)
    b.fail("condition has " + std::to_string(c.size()) + " values for an axis of " +
           std::to_string(dim));
  std::vector<int64_t> keep;
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i] != 0) keep.push_back(static_cast<int64_t>(i));
  b.op("Gather", {input, b.ints(keep)}, {{"axis", ir::Attribute(axis)}}, n.outputs[0]);
  return std::move(b.nodes);
}

// Each batch entry's first sequence_lens[b] steps reversed along time_axis:
// a GatherElements along time whose index is t' = len - 1 - t inside the
// length and t outside, spread over the other axes by Expand.
std::vector<ir::Node> reverse_sequence(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const ir::Shape& x = b.shape(0);
  if (x.size() < 2) b.fail("input " + ir::shape_str(x) + " has rank below 2");
  const int64_t time = n.attr_int("time_axis", 0), batch = n.attr_int("batch_axis", 1);
  if (!((time == 0 && batch == 1) || (time == 1 && batch == 0)))
    b.fail("time_axis " + std::to_string(time) + " and batch_axis " + std::to_string(batch) +
           " (one is 0, the other 1)");
  const std::vector<int64_t> lens = b.constant_input(1, "sequence_lens").to_i64();
  const int64_t steps = x[static_cast<size_t>(time)], batches = x[static_cast<size_t>(batch)];
  if (static_cast<int64_t>(lens.size()) != batches)
    b.fail("sequence_lens has " + std::to_string(lens.size()) + " values for a batch of " +
           std::to_string(batches));
  ir::Shape idx_shape(x.size(), 1);
  idx_shape[static_cast<size_t>(time)] = steps;
  idx_shape[static_cast<size_t>(batch)] = batches;
  std::vector<int64_t> idx(static_cast<size_t>(steps * batches));
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t e = 0; e < batches; ++e) {
      const int64_t len = lens[static_cast<size_t>(e)];
      if (len < 0 || len > steps)
        b.fail("sequence length " + std::to_string(len) + " is outside [0, " +
               std::to_string(steps) + "]");
      const int64_t at = time == 0 ? s * batches + e : e * steps + s;
      idx[static_cast<size_t>(at)] = s < len ? len - 1 - s : s;
    }
  const std::string small = b.constant(ir::Tensor::from_i64(idx, idx_shape));
  const std::string full =
      b.op("Expand", {small, b.ints(std::vector<int64_t>(x.begin(), x.end()))});
  b.op("GatherElements", {n.inputs[0], full}, {{"axis", ir::Attribute(time)}}, n.outputs[0]);
  return std::move(b.nodes);
}

// Scatter (opsets 9-10) is ScatterElements under its old name.
std::vector<ir::Node> scatter(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  b.op("ScatterElements", n.inputs, {{"axis", ir::Attribute(n.attr_int("axis", 0))}}, n.outputs[0]);
  return std::move(b.nodes);
}

// Upsample (opsets 7-9, deprecated) is Resize with asymmetric coordinates
// (and floor rounding for nearest); its scales are an attribute before opset 9.
std::vector<ir::Node> upsample(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const std::string mode = n.attr_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "bilinear")
    b.fail("mode '" + mode + "' (nearest or linear)");
  std::string scales;
  if (n.has_input(1)) {
    scales = n.inputs[1];
  } else {
    const std::vector<float> s = n.attr_floats("scales");
    if (s.size() != b.shape(0).size())
      b.fail(std::to_string(s.size()) + " scales for a rank-" + std::to_string(b.shape(0).size()) +
             " input");
    scales = b.constant(ir::Tensor::from_f32(s, {static_cast<int64_t>(s.size())}));
  }
  b.op("Resize", {n.inputs[0], "", scales},
       {{"mode", ir::Attribute(std::string(mode == "nearest" ? "nearest" : "linear"))},
        {"coordinate_transformation_mode", ir::Attribute(std::string("asymmetric"))},
        {"nearest_mode", ir::Attribute(std::string("floor"))}},
       n.outputs[0]);
  return std::move(b.nodes);
}

// LpPool: (sum over the window of |x|^p)^(1/p), the window sum an
// AveragePool (zero padding counted) times the window size.
std::vector<ir::Node> lp_pool(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const int64_t p = n.attr_int("p", 2);
  if (p < 1) b.fail("p = " + std::to_string(p) + " is not positive");
  const std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
  if (kernel.empty()) b.fail("kernel_shape is required");
  int64_t window = 1;
  for (int64_t k : kernel) window *= k;
  std::map<std::string, ir::Attribute> attrs;
  for (const char* key : {"kernel_shape", "strides", "pads", "auto_pad", "dilations", "ceil_mode"})
    if (n.has_attr(key)) attrs[key] = n.attrs.at(key);
  attrs["count_include_pad"] = ir::Attribute(int64_t{1});
  const std::string x = n.inputs[0];
  const std::string powered =
      p == 1   ? b.op("Abs", {x})
      : p == 2 ? b.op("Mul", {x, x})
               : b.op("Pow", {b.op("Abs", {x}), b.scalar(static_cast<float>(p))});
  const std::string sum =
      b.op("Mul", {b.op("AveragePool", {powered}, attrs), b.scalar(static_cast<float>(window))});
  if (p == 1)
    b.op("Identity", {sum}, {}, n.outputs[0]);
  else if (p == 2)
    b.op("Sqrt", {sum}, {}, n.outputs[0]);
  else
    b.op("Pow", {sum, b.scalar(1.0f / static_cast<float>(p))}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

// GroupNormalization (opset 18): statistics per (n, group) over the group's
// channels and the spatial axes, then a per-channel scale and bias.
std::vector<ir::Node> group_norm(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const ir::Shape& x = b.shape(0);
  if (x.size() < 3) b.fail("input " + ir::shape_str(x) + " has no spatial axes");
  const int64_t groups = n.attr_int("num_groups", 0);
  if (groups < 1 || x[1] % groups != 0)
    b.fail("num_groups " + std::to_string(groups) + " does not divide " + std::to_string(x[1]) +
           " channels");
  for (size_t i : {1, 2})
    if (b.shape(i) != ir::Shape{x[1]} && b.shape(i) != ir::Shape{groups})
      b.fail("input " + std::to_string(i) + " " + ir::shape_str(b.shape(i)) + " is not (" +
             std::to_string(x[1]) + ")");
  int64_t rest = 1;
  for (size_t d = 2; d < x.size(); ++d) rest *= x[d];
  const std::string grouped =
      b.op("Reshape", {n.inputs[0], b.ints({x[0], groups, x[1] / groups * rest})});
  const std::string normed = standardize(b, grouped, {2}, n.attr_float("epsilon", 1e-5f));
  const std::string back =
      b.op("Reshape", {normed, b.ints(std::vector<int64_t>(x.begin(), x.end()))});
  ir::Shape per_channel(x.size() - 1, 1);
  per_channel[0] = x[1];
  auto channelwise = [&](size_t i) {
    std::string v = n.inputs[i];
    if (b.shape(i)[0] != x[1]) {  // opset 18's per-group form: each group's value to its channels
      std::vector<int64_t> map;
      for (int64_t c = 0; c < x[1]; ++c) map.push_back(c / (x[1] / groups));
      v = b.op("Gather", {v, b.ints(map)});
    }
    return b.op("Reshape", {v, b.ints(per_channel)});
  };
  b.op("Add", {b.op("Mul", {back, channelwise(1)}), channelwise(2)}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

// MaxUnpool: zeros of the output shape with X written where MaxPool's
// indices (flat over the whole output tensor) point: a ScatterElements over
// the flattened tensors, whose gradient is a GatherElements of dY.
std::vector<ir::Node> max_unpool(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const ir::Shape& x = b.shape(0);
  if (x.size() < 3) b.fail("input " + ir::shape_str(x) + " has no spatial axes");
  if (b.shape(1) != x)
    b.fail("indices " + ir::shape_str(b.shape(1)) + " do not match X " + ir::shape_str(x));
  // The shape the indices count in: the pooled input's, from the pool's geometry.
  std::vector<int64_t> inferred;
  {
    const size_t k = x.size() - 2;
    const std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
    if (kernel.size() != k)
      b.fail("kernel_shape has " + std::to_string(kernel.size()) + " values for " +
             std::to_string(k) + " spatial axes");
    const std::vector<int64_t> strides = n.attr_ints("strides", std::vector<int64_t>(k, 1));
    const std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
    if (strides.size() != k || pads.size() != 2 * k)
      b.fail("strides or pads do not match the spatial axes");
    inferred = {x[0], x[1]};
    for (size_t d = 0; d < k; ++d)
      inferred.push_back((x[d + 2] - 1) * strides[d] + kernel[d] - pads[d] - pads[d + k]);
  }
  std::vector<int64_t> out = inferred;
  if (n.has_input(2)) {
    out = b.constant_input(2, "output_shape").to_i64();
    if (out.size() != x.size())
      b.fail("output_shape has " + std::to_string(out.size()) + " dims for a rank-" +
             std::to_string(x.size()) + " input");
    for (size_t d = 0; d < out.size(); ++d)
      if (out[d] < inferred[d] || (d < 2 && out[d] != inferred[d]))
        b.fail("output_shape " + ir::shape_str(out) + " is smaller than the unpooled " +
               ir::shape_str(inferred));
  }
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  const std::string zeros = b.constant(
      ir::Tensor::from_f32(std::vector<float>(static_cast<size_t>(total), 0.f), {total}));
  const std::string values = b.op("Reshape", {n.inputs[0], b.ints({ir::numel(x)})});
  std::string where = b.op("Reshape", {n.inputs[1], b.ints({ir::numel(x)})});
  if (out != inferred) {  // the same coordinates, counted in the larger output
    std::string rest = where, moved;
    for (size_t d = out.size(); d-- > 0;) {
      const std::string dim = b.constant(ir::Tensor::from_i64({inferred[d]}, {}));
      const std::string coord = d == 0 ? rest : b.op("Mod", {rest, dim});
      int64_t stride = 1;
      for (size_t e = d + 1; e < out.size(); ++e) stride *= out[e];
      const std::string scaled =
          b.op("Mul", {coord, b.constant(ir::Tensor::from_i64({stride}, {}))});
      moved = moved.empty() ? scaled : b.op("Add", {moved, scaled});
      if (d > 0) rest = b.op("Div", {rest, dim});
    }
    where = moved;
  }
  const std::string flat =
      b.op("ScatterElements", {zeros, where, values}, {{"axis", ir::Attribute(int64_t{0})}});
  b.op("Reshape", {flat, b.ints(out)}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

// Det of matrices up to 4 x 4 as the Leibniz sum over permutations:
// det = sum over s of sign(s) prod_i A[i, s(i)], the products as a chain of
// Muls (a ReduceProd's gradient would divide by zero entries).
std::vector<ir::Node> det(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const ir::Shape& x = b.shape(0);
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2])
    b.fail("input " + ir::shape_str(x) + " is not a (batch of) square matrices");
  const int64_t m = x.back();
  if (m < 1 || m > 4)
    b.fail(std::to_string(m) + " x " + std::to_string(m) +
           " matrices: Det is expanded into its Leibniz sum, for sizes 1 to 4");
  std::vector<int64_t> perm(static_cast<size_t>(m)), index;
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<float> sign;
  do {
    int inversions = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = i + 1; j < m; ++j) inversions += perm[i] > perm[j];
    sign.push_back(inversions % 2 ? -1.f : 1.f);
    for (int64_t i = 0; i < m; ++i) index.push_back(i * m + perm[i]);
  } while (std::next_permutation(perm.begin(), perm.end()));
  const int64_t terms = static_cast<int64_t>(sign.size());
  std::vector<int64_t> flat(x.begin(), x.end() - 2);
  flat.push_back(m * m);
  const int64_t last = static_cast<int64_t>(flat.size()) - 1;
  const std::string rows = b.op("Reshape", {n.inputs[0], b.ints(flat)});
  // (..., terms, m): entry i of each term's product
  const std::string picked =
      b.op("Gather", {rows, b.constant(ir::Tensor::from_i64(index, {terms, m}))},
           {{"axis", ir::Attribute(last)}});
  std::string product;
  for (int64_t i = 0; i < m; ++i) {
    const std::string factor =
        b.op("Squeeze", {b.op("Slice", {picked, b.ints({i}), b.ints({i + 1}), b.ints({last + 1})}),
                         b.ints({last + 1})});
    product = i == 0 ? factor : b.op("Mul", {product, factor});
  }
  const std::string signed_terms =
      b.op("Mul", {product, b.constant(ir::Tensor::from_f32(sign, {terms}))});
  b.op("ReduceSum", {signed_terms, b.ints({last})}, {{"keepdims", ir::Attribute(int64_t{0})}},
       n.outputs[0]);
  return std::move(b.nodes);
}

// Col2Im (opset 18, torch's fold): the columns (N, C * prod(block), L) summed
// into the image at their blocks' pixels. A ScatterElements with add over the
// flattened image plus one trash slot for taps that land in the padding,
// with a constant target per column entry; its gradient is a GatherElements.
std::vector<ir::Node> col2im(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const ir::Shape& x = b.shape(0);
  const std::vector<int64_t> image = b.constant_input(1, "image_shape").to_i64();
  const std::vector<int64_t> block = b.constant_input(2, "block_shape").to_i64();
  const size_t k = image.size();
  if (k == 0 || block.size() != k) b.fail("image_shape and block_shape differ in length");
  const std::vector<int64_t> dil = n.attr_ints("dilations", std::vector<int64_t>(k, 1));
  const std::vector<int64_t> stride = n.attr_ints("strides", std::vector<int64_t>(k, 1));
  const std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
  if (dil.size() != k || stride.size() != k || pads.size() != 2 * k)
    b.fail("dilations, strides or pads do not match " + std::to_string(k) + " spatial axes");
  int64_t block_size = 1, pixels = 1;
  std::vector<int64_t> blocks(k);  // block positions per axis
  int64_t positions = 1;
  for (size_t d = 0; d < k; ++d) {
    block_size *= block[d];
    pixels *= image[d];
    const int64_t span = dil[d] * (block[d] - 1) + 1;
    blocks[d] = (image[d] + pads[d] + pads[d + k] - span) / stride[d] + 1;
    if (blocks[d] < 1)
      b.fail("the blocks do not fit the padded image on axis " + std::to_string(d));
    positions *= blocks[d];
  }
  if (x.size() != 3 || x[1] % block_size != 0 || x[2] != positions)
    b.fail("input " + ir::shape_str(x) + " is not (N, C x " + std::to_string(block_size) + ", " +
           std::to_string(positions) + ")");
  const int64_t channels = x[1] / block_size;
  // target[(kk, l)]: the pixel that block offset kk of block position l lands on.
  std::vector<int64_t> target(static_cast<size_t>(block_size * positions));
  for (int64_t kk = 0; kk < block_size; ++kk)
    for (int64_t l = 0; l < positions; ++l) {
      int64_t rest_k = kk, rest_l = l, pixel = 0;
      bool inside = true;
      for (size_t d = k; d-- > 0;) {
        const int64_t off = rest_k % block[d], pos = rest_l % blocks[d];
        rest_k /= block[d];
        rest_l /= blocks[d];
        const int64_t at = pos * stride[d] - pads[d] + off * dil[d];
        inside = inside && at >= 0 && at < image[d];
        int64_t scale = 1;
        for (size_t e = d + 1; e < k; ++e) scale *= image[e];
        pixel += at * scale;
      }
      target[static_cast<size_t>(kk * positions + l)] = inside ? pixel : pixels;  // the trash slot
    }
  std::vector<int64_t> index;
  for (int64_t c = 0; c < channels; ++c) index.insert(index.end(), target.begin(), target.end());
  const int64_t per_image = channels * block_size * positions;
  const std::string cols = b.op("Reshape", {n.inputs[0], b.ints({x[0], per_image})});
  std::vector<int64_t> shifted(static_cast<size_t>(per_image));
  for (int64_t c = 0; c < channels; ++c)
    for (size_t i = 0; i < target.size(); ++i)
      shifted[static_cast<size_t>(c) * target.size() + i] =
          index[static_cast<size_t>(c) * target.size() + i] + c * (pixels + 1);
  const std::string where =
      b.op("Expand",
           {b.constant(ir::Tensor::from_i64(shifted, {1, per_image})), b.ints({x[0], per_image})});
  const std::string zeros = b.op("ConstantOfShape", {b.ints({x[0], channels * (pixels + 1)})});
  const std::string summed =
      b.op("ScatterElements", {zeros, where, cols},
           {{"axis", ir::Attribute(int64_t{1})}, {"reduction", ir::Attribute(std::string("add"))}});
  const std::string planes = b.op("Reshape", {summed, b.ints({x[0], channels, pixels + 1})});
  const std::string image_only =
      b.op("Slice", {planes, b.ints({0}), b.ints({pixels}), b.ints({2})});
  std::vector<int64_t> out = {x[0], channels};
  out.insert(out.end(), image.begin(), image.end());
  b.op("Reshape", {image_only, b.ints(out)}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

/// HannWindow, HammingWindow, BlackmanWindow: a constant of `size` values
/// a0 - a1 cos(2 pi k / N) + a2 cos(4 pi k / N), N = size (periodic) or size - 1.
std::vector<ir::Node> window(ir::Graph& g, const ir::Node& n, std::set<std::string>& t, double a0,
                             double a1, double a2) {
  Builder b(g, n, t);
  const std::vector<int64_t> size = b.constant_input(0, "size").to_i64();
  if (size.size() != 1 || size[0] < 0) b.fail("size must be one non-negative integer");
  const int64_t dtype = n.attr_int("output_datatype", 1);
  if (dtype != 1) b.fail("output_datatype " + std::to_string(dtype) + " (only float, 1)");
  const double period = static_cast<double>(n.attr_int("periodic", 1) != 0 ? size[0] : size[0] - 1);
  constexpr double kPi = 3.14159265358979323846;
  std::vector<float> w(static_cast<size_t>(size[0]));
  for (int64_t k = 0; k < size[0]; ++k) {
    const double x = period > 0 ? 2 * kPi * static_cast<double>(k) / period : 0;
    w[static_cast<size_t>(k)] = static_cast<float>(a0 - a1 * std::cos(x) + a2 * std::cos(2 * x));
  }
  b.op("Identity", {b.constant(ir::Tensor::from_f32(w, {size[0]}))}, {}, n.outputs[0]);
  return std::move(b.nodes);
}
std::vector<ir::Node> hann(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  return window(g, n, t, 0.5, 0.5, 0);
}
std::vector<ir::Node> hamming(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  return window(g, n, t, 25.0 / 46.0, 21.0 / 46.0, 0);
}
std::vector<ir::Node> blackman(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  return window(g, n, t, 0.42, 0.5, 0.08);
}

// The expansions of this file and its siblings but narrow_ints.cc and optimizer_ops.cc.
std::map<std::string, Expansion> own_expansions() {
  return {
      {"DepthToSpace", {"Reshape, Transpose, Reshape", depth_to_space}},
      {"SpaceToDepth", {"Reshape, Transpose, Reshape", space_to_depth}},
      {"InstanceNormalization", {"ReduceMean, Sub, Mul, Add, Sqrt, Div, Reshape", instance_norm}},
      {"MeanVarianceNormalization", {"ReduceMean, Mul, Sub, Sqrt, Add, Div", mean_variance_norm}},
      {"LpNormalization", {"ReduceL1 or ReduceL2, Div", lp_norm}},
      {"GlobalMaxPool", {"ReduceMax", global_max_pool}},
      {"LRN", {"Mul, Reshape, AveragePool, Add, Pow, Div", lrn}},
      {"LpPool", {"Abs, Pow, AveragePool, Mul, Sqrt or Pow", lp_pool}},
      {"GroupNormalization", {"Reshape, ReduceMean, Sub, Mul, Add, Sqrt, Div", group_norm}},
      {"DFT", {"MatMuls by constant cosine and sine matrices", detail::expand_dft}},
      {"STFT", {"Gather of the frames, Mul by the window, the DFT's MatMuls", detail::expand_stft}},
      {"MelWeightMatrix", {"a constant", detail::expand_mel_weight_matrix}},
      {"Col2Im", {"ScatterElements (add) of the columns into the image", col2im}},
      {"Det", {"Reshape, Gather, Slice, Mul, ReduceSum (the Leibniz sum, up to 4 x 4)", det}},
      {"MaxUnpool", {"ScatterElements over the flattened output", max_unpool}},
      {"Upsample", {"Resize (asymmetric; floor for nearest)", upsample}},
      {"Compress", {"Gather (a constant condition)", compress}},
      {"ReverseSequence", {"Expand, GatherElements (constant sequence_lens)", reverse_sequence}},
      {"Scatter", {"ScatterElements (its later name)", scatter}},
      {"HannWindow", {"a constant", hann}},
      {"HammingWindow", {"a constant", hamming}},
      {"BlackmanWindow", {"a constant", blackman}},
      {"GRU",
       {"unrolled: MatMul, Add, Sigmoid, Tanh, Mul, Sub, Slice, Concat", detail::expand_gru}},
      {"Einsum", {"Transpose, Reshape, MatMul, Mul, ReduceSum", detail::expand_einsum}},
      {"TfIdfVectorizer",
       {"Gather of the n-gram windows, Equal, ReduceMin, ReduceSum, MatMul", detail::expand_tfidf}},
      {"If", {"the ops of the branch its constant condition takes", detail::expand_if}},
      {"Loop", {"its body unrolled over a constant trip count", detail::expand_loop}},
      {"Scan", {"its body unrolled over the scan length", detail::expand_scan}},
      {"RNN", {"unrolled: MatMul, Add, Tanh, Slice, Concat", detail::expand_rnn}},
  };
}

}  // namespace

const std::map<std::string, Expansion>& expanded_ops() {
  static const std::map<std::string, Expansion> ops = [] {
    std::map<std::string, Expansion> all = own_expansions();
    for (const auto& [name, e] : detail::narrow_int_expansions()) all.emplace(name, e);
    for (const auto& [name, e] : detail::optimizer_expansions()) all.emplace(name, e);
    return all;
  }();
  return ops;
}

}  // namespace pipetrain::importer
