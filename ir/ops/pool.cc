// MaxPool, AveragePool (1-D to 3-D windows) and GlobalAveragePool.
#include <string>

#include "ir/op_registry.h"
#include "ir/ops/window.h"

namespace pipetrain::ir {

namespace {

// Shape rule shared by the windowed pools: X (N, C, D...) -> Y (N, C, O...).
Shape pooled_shape(InferContext& c) {
  const Shape& x = c.shape(0);
  if (x.size() < 3 || x.size() > 5)
    c.unsupported("input X " + shape_str(x) + " must be (N, C, D1[, D2[, D3]]): 1-D to 3-D only");
  if (!c.node().has_attr("kernel_shape")) c.fail("attribute 'kernel_shape' is required");
  int64_t ceil_mode = c.node().attr_int("ceil_mode", 0);
  if (ceil_mode != 0 && ceil_mode != 1) c.fail("ceil_mode must be 0 or 1");
  WindowGeometry g = window_geometry(c.node(), Shape(x.begin() + 2, x.end()),
                                     c.node().attr_ints("kernel_shape"), ceil_mode != 0);
  for (size_t i = 0; i < g.rank(); ++i)
    if (g.pads_begin[i] >= g.extent(i) || g.pads_end[i] >= g.extent(i))
      c.fail("pads " + shape_str(g.pads_begin) + " + " + shape_str(g.pads_end) +
             " must be smaller than the kernel " + shape_str(g.kernel) +
             " (a window would see only padding)");
  Shape y = {x[0], x[1]};
  y.insert(y.end(), g.out.begin(), g.out.end());
  return y;
}

std::vector<AttrSpec> window_attrs() {
  return {{"auto_pad", AttrType::kString}, {"ceil_mode", AttrType::kInt},
          {"dilations", AttrType::kInts},  {"kernel_shape", AttrType::kInts},
          {"pads", AttrType::kInts},       {"strides", AttrType::kInts}};
}

}  // namespace

// Y = max over the window (padding never wins); Indices (i64) hold the
// flat position in X, row-major (storage_order 0) or with the spatial axes
// column-major (storage_order 1), batch and channel offsets included.
OpSchema schema_MaxPool() {
  OpSchema s;
  s.max_outputs = 2;
  s.attrs = window_attrs();
  s.attrs.push_back({"storage_order", AttrType::kInt});
  s.infer = [](InferContext& c) {
    Shape y = pooled_shape(c);
    int64_t order = c.node().attr_int("storage_order", 0);
    if (order != 0 && order != 1) c.fail("storage_order must be 0 or 1");
    c.set_output(0, c.dtype(0), y);
    if (c.num_outputs() > 1) c.set_output(1, DType::kI64, y);
  };
  return s;
}

// Y = mean over the window; the divisor counts the taps inside X, or with
// count_include_pad also those in the explicit padding (never beyond it).
OpSchema schema_AveragePool() {
  OpSchema s;
  s.attrs = window_attrs();
  s.attrs.push_back({"count_include_pad", AttrType::kInt});
  s.infer = [](InferContext& c) { c.set_output(0, c.dtype(0), pooled_shape(c)); };
  return s;
}

// Y (N, C, 1, ...) = mean of X (N, C, D...) over the spatial axes.
OpSchema schema_GlobalAveragePool() {
  OpSchema s;
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    if (x.size() < 2) c.fail("input X " + shape_str(x) + " must be (N, C, D...)");
    Shape y = x;
    for (size_t i = 2; i < y.size(); ++i) y[i] = 1;
    c.set_output(0, c.dtype(0), y);
  };
  return s;
}

/// Y[r, c] = the (output_height, output_width) bins of roi r = (x1, y1, x2,
/// y2) over image batch_indices[r] of X, each the average (or max) of
/// bilinear samples.
OpSchema schema_RoiAlign() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 3;
  s.attrs = {{"coordinate_transformation_mode", AttrType::kString},
             {"mode", AttrType::kString},
             {"output_height", AttrType::kInt},
             {"output_width", AttrType::kInt},
             {"sampling_ratio", AttrType::kInt},
             {"spatial_scale", AttrType::kFloat}};
  s.infer = [](InferContext& c) {
    const Shape &x = c.shape(0), &rois = c.shape(1), &b = c.shape(2);
    if (c.dtype(0) != DType::kF32 || c.dtype(1) != DType::kF32)
      c.unsupported("RoiAlign of " + std::string(dtype_name(c.dtype(0))) + " (f32 only)");
    if (x.size() != 4) c.fail("input " + shape_str(x) + " is not (N, C, H, W)");
    if (rois.size() != 2 || rois[1] != 4) c.fail("rois " + shape_str(rois) + " is not (R, 4)");
    if (b != Shape{rois[0]} || (c.dtype(2) != DType::kI64 && c.dtype(2) != DType::kI32))
      c.fail("batch_indices " + std::string(dtype_name(c.dtype(2))) + " " + shape_str(b) +
             " are not " + std::to_string(rois[0]) + " integers");
    const std::string mode = c.node().attr_string("mode", "avg");
    if (mode != "avg" && mode != "max") c.fail("mode '" + mode + "' (avg or max)");
    const std::string ct = c.node().attr_string("coordinate_transformation_mode", "half_pixel");
    if (ct != "half_pixel" && ct != "output_half_pixel")
      c.fail("coordinate_transformation_mode '" + ct + "' (half_pixel or output_half_pixel)");
    const int64_t oh = c.node().attr_int("output_height", 1),
                  ow = c.node().attr_int("output_width", 1);
    if (oh < 1 || ow < 1) c.fail("output size " + std::to_string(oh) + "x" + std::to_string(ow));
    c.set_output(0, DType::kF32, {rois[0], x[1], oh, ow});
  };
  return s;
}

/// (dY, X, rois, batch_indices) -> dX; RoiAlign's attributes.
OpSchema schema_RoiAlignGrad() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 4;
  s.attrs = schema_RoiAlign().attrs;
  s.infer = [](InferContext& c) { c.set_output(0, DType::kF32, c.shape(1)); };
  s.differentiable = false;
  s.internal = true;
  return s;
}

}  // namespace pipetrain::ir
