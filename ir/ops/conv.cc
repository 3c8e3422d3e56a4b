// Conv and ConvTranspose: 1-D, 2-D and 3-D, grouped, dilated, strided, with
// explicit or automatic padding and an optional bias.
#include <string>

#include "ir/op_registry.h"
#include "ir/ops/window.h"

namespace pipetrain::ir {

namespace {

const std::vector<AttrSpec> kWindowAttrs = {
    {"auto_pad", AttrType::kString},   {"dilations", AttrType::kInts}, {"group", AttrType::kInt},
    {"kernel_shape", AttrType::kInts}, {"pads", AttrType::kInts},      {"strides", AttrType::kInts},
};

// Checks the ranks and dtypes Conv and ConvTranspose share: X (N, C, D...)
// and W of the same rank; returns group.
int64_t check_ranks(InferContext& c) {
  const Shape& x = c.shape(0);
  const Shape& w = c.shape(1);
  if (x.size() < 3 || x.size() > 5)
    c.unsupported("input X " + shape_str(x) + " must be (N, C, D1[, D2[, D3]]): 1-D to 3-D only");
  if (w.size() != x.size())
    c.fail("weights W " + shape_str(w) + " must have the rank of X " + shape_str(x));
  if (c.dtype(1) != c.dtype(0)) c.fail("X and W must have the same dtype");
  int64_t group = c.node().attr_int("group", 1);
  if (group < 1) c.fail("group must be positive");
  return group;
}

// Checks kernel_shape against W and B (out_channels); returns W's spatial dims.
std::vector<int64_t> check_kernel_and_bias(InferContext& c, int64_t out_channels) {
  const Shape& w = c.shape(1);
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (c.node().has_attr("kernel_shape") && c.node().attr_ints("kernel_shape") != kernel)
    c.fail("kernel_shape " + shape_str(c.node().attr_ints("kernel_shape")) +
           " does not match the weights " + shape_str(w));
  if (c.has_input(2)) {
    if (c.shape(2) != Shape{out_channels})
      c.fail("bias B " + shape_str(c.shape(2)) + " must be (" + std::to_string(out_channels) +
             ") for weights " + shape_str(w));
    if (c.dtype(2) != c.dtype(0)) c.fail("X and B must have the same dtype");
  }
  return kernel;
}

}  // namespace

// Y[n, m, o...] = B[m] + sum_{c in group(m), k...} X[n, c, o*s + k*d - pb] W[m, c, k...]
OpSchema schema_Conv() {
  OpSchema s;
  s.min_inputs = 2;
  // pipetrain's own input 3 (ir/passes/fusion.h): a tensor of Y's shape
  // added to the convolution before the activation.
  s.max_inputs = 4;
  s.attrs = kWindowAttrs;
  // pipetrain's own: the ReLU fused into it (ir/passes/fusion.h).
  s.attrs.push_back({"activation", AttrType::kString});
  s.infer = [](InferContext& c) {
    const std::string activation = c.node().attr_string("activation", "");
    if (!activation.empty() && activation != "Relu")
      c.fail("activation '" + activation + "' is not supported (Relu only)");
    const Shape& x = c.shape(0);
    const Shape& w = c.shape(1);
    int64_t group = check_ranks(c);
    if (w[1] * group != x[1] || w[0] % group != 0)
      c.fail("weights W " + shape_str(w) + " do not fit X " + shape_str(x) + " with group " +
             std::to_string(group) + ": expected W (M, C / group, ...) with M divisible by group");
    std::vector<int64_t> kernel = check_kernel_and_bias(c, w[0]);
    WindowGeometry g =
        window_geometry(c.node(), Shape(x.begin() + 2, x.end()), kernel, /*ceil_mode=*/false);
    Shape y = {x[0], w[0]};
    y.insert(y.end(), g.out.begin(), g.out.end());
    if (c.has_input(3) && (c.shape(3) != y || c.dtype(3) != c.dtype(0)))
      c.fail("the residual input " + shape_str(c.shape(3)) + " must have Y's shape " +
             shape_str(y) + " and X's dtype");
    c.set_output(0, c.dtype(0), y);
  };
  return s;
}

// Scatter form of the adjoint of Conv: every X[n, c, i...] adds
// X * W[c, m, k...] to Y[n, m, i*s + k*d - pb]; W is (C, M / group, k...).
OpSchema schema_ConvTranspose() {
  OpSchema s;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.attrs = kWindowAttrs;
  s.attrs.push_back({"output_padding", AttrType::kInts});
  s.attrs.push_back({"output_shape", AttrType::kInts});
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    const Shape& w = c.shape(1);
    int64_t group = check_ranks(c);
    if (w[0] != x[1] || x[1] % group != 0)
      c.fail("weights W " + shape_str(w) + " do not fit X " + shape_str(x) + " with group " +
             std::to_string(group) + ": expected W (C, M / group, ...) with C divisible by group");
    int64_t out_channels = w[1] * group;
    std::vector<int64_t> kernel = check_kernel_and_bias(c, out_channels);
    WindowGeometry g = transpose_geometry(c.node(), Shape(x.begin() + 2, x.end()), kernel);
    Shape y = {x[0], out_channels};
    y.insert(y.end(), g.out.begin(), g.out.end());
    c.set_output(0, c.dtype(0), y);
  };
  return s;
}

}  // namespace pipetrain::ir
