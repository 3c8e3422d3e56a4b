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

}  // namespace pipetrain::ir
