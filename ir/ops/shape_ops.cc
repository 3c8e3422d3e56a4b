// Shape rules of the ops that only relabel, permute or broadcast data, or
// produce shape-like constants: Flatten, Reshape, Transpose, Squeeze,
// Unsqueeze, Expand, Identity, Shape, Constant, ConstantOfShape, Range.
// Inputs that decide an output shape (Reshape's shape, Expand's shape, axes,
// Range's bounds) must be constants: shapes are static.
#include <algorithm>
#include <cmath>
#include <string>

#include "ir/op_registry.h"
#include "ir/ops/data_movement.h"

namespace pipetrain::ir {

namespace {

/// Axes from input `i` when present (opset 13+), else from the `axes` attribute.
/// `present` tells whether either was given.
std::vector<int64_t> axes_input_or_attr(const InferContext& c, size_t i, bool* present) {
  const bool in = c.has_input(i), attr = c.node().has_attr("axes");
  if (in && attr) c.fail("axes are given both as attribute and as input");
  *present = in || attr;
  return in ? c.constant_ints(i) : c.node().attr_ints("axes");
}

}  // namespace

OpSchema schema_Flatten() {
  OpSchema s;
  s.attrs = {{"axis", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    const int64_t rank = static_cast<int64_t>(x.size());
    int64_t axis = c.node().attr_int("axis", 1);
    if (axis < -rank || axis > rank)
      c.fail("axis " + std::to_string(axis) + " is out of range [-r, r] for input " + shape_str(x));
    if (axis < 0) axis += rank;
    // (d0 * ... * d(axis-1), d(axis) * ... * d(r-1))
    Shape outer(x.begin(), x.begin() + axis), inner(x.begin() + axis, x.end());
    c.set_output(0, c.dtype(0), {numel(outer), numel(inner)});
  };
  return s;
}

OpSchema schema_Reshape() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"allowzero", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    const std::vector<int64_t> target = c.constant_ints(1);
    const bool allowzero = c.node().attr_int("allowzero", 0) != 0;
    Shape out(target.size());
    int64_t infer_at = -1;
    bool has_zero = false;
    for (size_t i = 0; i < target.size(); ++i) {
      const int64_t d = target[i];
      if (d == -1) {
        if (infer_at >= 0) c.fail("shape " + shape_str(target) + " has more than one -1");
        infer_at = static_cast<int64_t>(i);
        out[i] = 1;
      } else if (d == 0 && !allowzero) {
        if (i >= x.size())
          c.fail("shape " + shape_str(target) + " copies dim " + std::to_string(i) +
                 " (0) which input " + shape_str(x) + " lacks");
        out[i] = x[i];
      } else if (d < 0) {
        c.fail("shape " + shape_str(target) + " has the invalid dim " + std::to_string(d));
      } else {
        has_zero = has_zero || d == 0;
        out[i] = d;
      }
    }
    if (infer_at >= 0) {
      if (has_zero) c.fail("shape " + shape_str(target) + " mixes -1 with 0 under allowzero=1");
      const int64_t known = numel(out);
      if (known == 0 || numel(x) % known != 0)
        c.fail("cannot infer the -1 in shape " + shape_str(target) + " for input " + shape_str(x));
      out[static_cast<size_t>(infer_at)] = numel(x) / known;
    }
    if (numel(out) != numel(x))
      c.fail("cannot reshape input " + shape_str(x) + " to " + shape_str(out) + " (shape " +
             shape_str(target) + ")");
    c.set_output(0, c.dtype(0), out);
  };
  return s;
}

OpSchema schema_Transpose() {
  OpSchema s;
  s.attrs = {{"perm", AttrType::kInts}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    std::vector<int64_t> perm = c.node().attr_ints("perm");
    if (!c.node().has_attr("perm"))
      for (size_t i = x.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    if (perm.size() != x.size())
      c.fail("perm " + shape_str(perm) + " does not match input " + shape_str(x));
    std::vector<bool> seen(x.size(), false);
    Shape out(x.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      const int64_t p = perm[i];
      if (p < 0 || p >= static_cast<int64_t>(x.size()) || seen[static_cast<size_t>(p)])
        c.fail("perm " + shape_str(perm) + " is not a permutation of the axes of input " +
               shape_str(x));
      seen[static_cast<size_t>(p)] = true;
      out[i] = x[static_cast<size_t>(p)];
    }
    c.set_output(0, c.dtype(0), out);
  };
  return s;
}

OpSchema schema_Squeeze() {
  OpSchema s;
  s.max_inputs = 2;
  s.attrs = {{"axes", AttrType::kInts}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    const int64_t rank = static_cast<int64_t>(x.size());
    bool given = false;
    const std::vector<int64_t> axes = axes_input_or_attr(c, 1, &given);
    std::vector<bool> drop(x.size(), false);
    if (!given || axes.empty()) {
      // No axes (or an empty axes input, as onnxruntime reads it): remove every
      // dimension of size 1.
      for (size_t a = 0; a < x.size(); ++a) drop[a] = x[a] == 1;
    }
    for (int64_t a : axes) {
      const int64_t n = a < 0 ? a + rank : a;
      if (n < 0 || n >= rank)
        c.fail("axis " + std::to_string(a) + " is out of range for input " + shape_str(x));
      if (x[static_cast<size_t>(n)] != 1)
        c.fail("cannot squeeze axis " + std::to_string(a) + " of input " + shape_str(x) +
               ": its size is not 1");
      drop[static_cast<size_t>(n)] = true;
    }
    Shape out;
    for (size_t a = 0; a < x.size(); ++a)
      if (!drop[a]) out.push_back(x[a]);
    c.set_output(0, c.dtype(0), out);
  };
  return s;
}

OpSchema schema_Unsqueeze() {
  OpSchema s;
  s.max_inputs = 2;
  s.attrs = {{"axes", AttrType::kInts}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    bool given = false;
    const std::vector<int64_t> axes = axes_input_or_attr(c, 1, &given);
    if (!given || axes.empty()) c.fail("needs axes (attribute or input 1)");
    // Axes index the output, whose rank is rank(x) + len(axes).
    const int64_t out_rank = static_cast<int64_t>(x.size() + axes.size());
    std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
    for (int64_t a : axes) {
      const int64_t n = a < 0 ? a + out_rank : a;
      if (n < 0 || n >= out_rank || inserted[static_cast<size_t>(n)])
        c.fail("axes " + shape_str(axes) + " are out of range or repeated for output rank " +
               std::to_string(out_rank) + " (input " + shape_str(x) + ")");
      inserted[static_cast<size_t>(n)] = true;
    }
    Shape out;
    size_t next = 0;
    for (size_t a = 0; a < inserted.size(); ++a) out.push_back(inserted[a] ? 1 : x[next++]);
    c.set_output(0, c.dtype(0), out);
  };
  return s;
}

OpSchema schema_Expand() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.infer = [](InferContext& c) {
    const Shape target = c.constant_ints(1);
    for (int64_t d : target)
      if (d < 0) c.fail("shape " + shape_str(target) + " has a negative dim");
    // Bidirectional: numpy broadcast of the input shape and the requested one.
    Shape out = with_node(c, [&] { return broadcast_shapes(c.shape(0), target); });
    c.set_output(0, c.dtype(0), out);
  };
  return s;
}

OpSchema schema_Identity() {
  OpSchema s;
  s.infer = [](InferContext& c) { c.set_output(0, c.dtype(0), c.shape(0)); };
  return s;
}

OpSchema schema_Shape() {
  OpSchema s;
  s.attrs = {{"start", AttrType::kInt}, {"end", AttrType::kInt}};
  s.differentiable = false;
  s.infer = [](InferContext& c) {
    const int64_t rank = static_cast<int64_t>(c.shape(0).size());
    auto [first, last] =
        shape_op_range(rank, c.node().attr_int("start", 0), c.node().attr_int("end", rank));
    c.set_output(0, DType::kI64, {last - first});
  };
  return s;
}

OpSchema schema_Constant() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 0;
  s.attrs = {{"value", AttrType::kTensor},
             {"value_float", AttrType::kFloat},
             {"value_floats", AttrType::kFloats},
             {"value_int", AttrType::kInt},
             {"value_ints", AttrType::kInts}};
  s.differentiable = false;
  s.infer = [](InferContext& c) {
    Tensor v = with_node(c, [&] { return constant_node_value(c.node()); });
    c.set_output(0, v.dtype(), v.shape());
  };
  return s;
}

OpSchema schema_ConstantOfShape() {
  OpSchema s;
  s.attrs = {{"value", AttrType::kTensor}};
  s.differentiable = false;
  s.infer = [](InferContext& c) {
    Tensor v = with_node(c, [&] { return constant_of_shape_value(c.node()); });
    if (c.shape(0).size() != 1) c.fail("the shape input must be 1-D, is " + shape_str(c.shape(0)));
    const Shape out = c.constant_ints(0);
    for (int64_t d : out)
      if (d < 0) c.fail("shape " + shape_str(out) + " has a negative dim");
    c.set_output(0, v.dtype(), out);
  };
  return s;
}

OpSchema schema_Range() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 3;
  s.differentiable = false;
  s.infer = [](InferContext& c) {
    const DType t = c.dtype(0);
    if (t != DType::kF32 && t != DType::kI64 && t != DType::kI32)
      c.unsupported(std::string("dtype ") + dtype_name(t) + " is not supported (f32, i64, i32)");
    for (size_t i = 0; i < 3; ++i) {
      if (c.dtype(i) != t)
        c.fail("start, limit and delta must share a dtype; input " + std::to_string(i) + " is " +
               dtype_name(c.dtype(i)) + ", start is " + dtype_name(t));
      if (numel(c.shape(i)) != 1)
        c.fail("input " + std::to_string(i) + " must be a scalar, is " + shape_str(c.shape(i)));
      c.constant_ints(i);  // fails with the standard message when not a constant
    }
    // n = max(ceil((limit - start) / delta), 0)
    int64_t n = 0;
    if (t == DType::kF32) {
      const double start = c.constant(0)->at(0), limit = c.constant(1)->at(0),
                   delta = c.constant(2)->at(0);
      if (delta == 0) c.fail("delta is 0");
      n = static_cast<int64_t>(std::max(std::ceil((limit - start) / delta), 0.0));
    } else {
      const int64_t start = c.constant_ints(0)[0], limit = c.constant_ints(1)[0],
                    delta = c.constant_ints(2)[0];
      if (delta == 0) c.fail("delta is 0");
      if (delta > 0 && limit > start) n = (limit - start + delta - 1) / delta;
      if (delta < 0 && start > limit) n = (start - limit - delta - 1) / -delta;
    }
    c.set_output(0, t, {n});
  };
  return s;
}

}  // namespace pipetrain::ir
