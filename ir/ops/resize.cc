// Schemas of Resize and its gradient. Scales and sizes must be constants
// (static shapes); the interpolation itself is executor/device/resize_plan.h.
#include <cmath>
#include <string>

#include "ir/op_registry.h"
#include "ir/ops/data_movement.h"

namespace pipetrain::ir {

namespace {

std::vector<AttrSpec> resize_attrs() {
  return {{"mode", AttrType::kString},
          {"coordinate_transformation_mode", AttrType::kString},
          {"nearest_mode", AttrType::kString},
          {"cubic_coeff_a", AttrType::kFloat},
          {"exclude_outside", AttrType::kInt},
          {"extrapolation_value", AttrType::kFloat},
          {"antialias", AttrType::kInt},
          {"axes", AttrType::kInts},
          {"keep_aspect_ratio_policy", AttrType::kString}};
}

void check_choice(InferContext& c, const char* attr, const std::string& dflt,
                  std::initializer_list<const char*> allowed) {
  const std::string v = c.node().attr_string(attr, dflt);
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return;
    list += std::string(list.empty() ? "" : ", ") + a;
  }
  c.unsupported(std::string(attr) + " '" + v + "' (pipetrain runs " + list + ")");
}

/// Resize's output shape from X, scales or sizes (constants), axes and the
/// aspect-ratio policy; the attributes are checked on the way.
Shape resize_output(InferContext& c) {
  const Shape& x = c.shape(0);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0) c.fail("input is a scalar");
  if (c.dtype(0) != DType::kF32) c.unsupported(std::string("Resize of ") + dtype_name(c.dtype(0)));
  check_choice(c, "mode", "nearest", {"nearest", "linear", "cubic"});
  check_choice(c, "coordinate_transformation_mode", "half_pixel",
               {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_crop_and_resize", "tf_half_pixel_for_nn"});
  check_choice(c, "nearest_mode", "round_prefer_floor",
               {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  check_choice(c, "keep_aspect_ratio_policy", "stretch", {"stretch", "not_larger", "not_smaller"});
  std::vector<int64_t> axes = c.node().attr_ints("axes");
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  for (int64_t& a : axes) a = with_node(c, [&] { return normalize_axis(a, rank); });
  const bool has_scales = c.has_input(2) && numel(c.shape(2)) > 0;
  const bool has_sizes = c.has_input(3) && numel(c.shape(3)) > 0;
  if (has_scales == has_sizes) c.fail("exactly one of scales and sizes must be given");
  Shape out = x;
  if (has_sizes) {
    const std::vector<int64_t> sizes = c.constant_ints(3);
    if (sizes.size() != axes.size())
      c.fail(std::to_string(sizes.size()) + " sizes for " + std::to_string(axes.size()) + " axes");
    const std::string policy = c.node().attr_string("keep_aspect_ratio_policy", "stretch");
    double ratio = policy == "not_larger" ? 1e300 : 0.0;
    for (size_t k = 0; k < axes.size(); ++k) {
      const double r = static_cast<double>(sizes[k]) / static_cast<double>(x[axes[k]]);
      ratio = policy == "not_larger" ? std::min(ratio, r) : std::max(ratio, r);
    }
    for (size_t k = 0; k < axes.size(); ++k)
      out[axes[k]] =
          policy == "stretch"
              ? sizes[k]
              : static_cast<int64_t>(std::round(ratio * static_cast<double>(x[axes[k]])));
  } else {
    if (c.dtype(2) != DType::kF32) c.fail("scales must be float");
    const Tensor* s = c.constant(2);
    if (!s) c.fail("scales must be a constant known at import time (static shapes only)");
    if (s->numel() != static_cast<int64_t>(axes.size()))
      c.fail(std::to_string(s->numel()) + " scales for " + std::to_string(axes.size()) + " axes");
    for (size_t k = 0; k < axes.size(); ++k) {
      const double v = s->data<float>()[k];
      if (!(v > 0)) c.fail("scale " + std::to_string(v) + " is not positive");
      out[axes[k]] = static_cast<int64_t>(std::floor(static_cast<double>(x[axes[k]]) * v));
    }
  }
  return out;
}

}  // namespace

/// Y = X resampled (nearest, linear or cubic) to sizes, or by scales.
OpSchema schema_Resize() {
  OpSchema s;
  s.max_inputs = 4;
  s.attrs = resize_attrs();
  s.infer = [](InferContext& c) { c.set_output(0, c.dtype(0), resize_output(c)); };
  return s;
}

/// (dY, roi, scales, sizes) -> dX of shape input_shape; Resize's attributes.
OpSchema schema_ResizeGrad() {
  OpSchema s;
  s.max_inputs = 4;
  s.attrs = resize_attrs();
  s.attrs.push_back({"input_shape", AttrType::kInts});
  s.infer = [](InferContext& c) {
    if (!c.node().has_attr("input_shape")) c.fail("attribute input_shape is required");
    c.set_output(0, c.dtype(0), c.node().attr_ints("input_shape"));
  };
  s.differentiable = false;
  s.internal = true;
  return s;
}

/// Y[n, c, i, j] = X[n, c] sampled at grid[n, i, j] = (x, y) in [-1, 1]:
/// 4-D X (N, C, H, W) and grid (N, Ho, Wo, 2), as torch's grid_sample.
OpSchema schema_GridSample() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"align_corners", AttrType::kInt},
             {"mode", AttrType::kString},
             {"padding_mode", AttrType::kString}};
  s.infer = [](InferContext& c) {
    const Shape &x = c.shape(0), &grid = c.shape(1);
    if (c.dtype(0) != DType::kF32 || c.dtype(1) != DType::kF32)
      c.unsupported("GridSample of " + std::string(dtype_name(c.dtype(0))) + " (f32 only)");
    if (x.size() != 4)
      c.unsupported("input " + shape_str(x) + ": only 2-D sampling (N, C, H, W) is supported");
    if (grid.size() != 4 || grid[0] != x[0] || grid[3] != 2)
      c.fail("grid " + shape_str(grid) + " is not (" + std::to_string(x[0]) + ", Ho, Wo, 2)");
    const std::string mode = c.node().attr_string("mode", "bilinear");
    if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
      c.fail("mode '" + mode + "' (bilinear, nearest or bicubic)");
    const std::string pad = c.node().attr_string("padding_mode", "zeros");
    if (pad != "zeros" && pad != "border" && pad != "reflection")
      c.fail("padding_mode '" + pad + "' (zeros, border or reflection)");
    c.set_output(0, DType::kF32, {x[0], x[1], grid[1], grid[2]});
  };
  return s;
}

/// (dY, X, grid) -> (dX, dGrid); GridSample's attributes.
OpSchema schema_GridSampleGrad() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 3;
  s.min_outputs = 1;
  s.max_outputs = 2;
  s.attrs = schema_GridSample().attrs;
  s.infer = [](InferContext& c) {
    if (c.node().has_output(0)) c.set_output(0, DType::kF32, c.shape(1));
    if (c.node().has_output(1)) c.set_output(1, DType::kF32, c.shape(2));
  };
  s.differentiable = false;
  s.internal = true;
  return s;
}

}  // namespace pipetrain::ir
