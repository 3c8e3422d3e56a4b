// Schemas of the axis scans (ArgMax, ArgMin, CumSum), the layout ops Trilu
// and Tile, and Size.
#include <string>

#include "ir/op_registry.h"
#include "ir/ops/data_movement.h"

namespace pipetrain::ir {

namespace {

/// ArgMax / ArgMin: int64 indices along `axis`, kept as 1 with keepdims.
OpSchema arg_extreme() {
  OpSchema s;
  s.differentiable = false;
  s.attrs = {{"axis", AttrType::kInt},
             {"keepdims", AttrType::kInt},
             {"select_last_index", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    if (x.empty()) c.fail("input is a scalar: there is no axis to search");
    if (c.dtype(0) == DType::kBool) c.fail("input is bool");
    const int64_t axis = with_node(c, [&] {
      return normalize_axis(c.node().attr_int("axis", 0), static_cast<int64_t>(x.size()));
    });
    if (x[static_cast<size_t>(axis)] == 0) c.fail("axis " + std::to_string(axis) + " is empty");
    Shape out;
    for (size_t d = 0; d < x.size(); ++d) {
      if (d != static_cast<size_t>(axis))
        out.push_back(x[d]);
      else if (c.node().attr_int("keepdims", 1) != 0)
        out.push_back(1);
    }
    c.set_output(0, DType::kI64, out);
  };
  return s;
}

/// A scalar (or one-element) int64 input.
void require_int_scalar(InferContext& c, size_t i, const char* what) {
  if ((c.dtype(i) != DType::kI64 && c.dtype(i) != DType::kI32) || numel(c.shape(i)) != 1)
    c.fail(std::string(what) + " must be one integer, got " + dtype_name(c.dtype(i)) + " " +
           shape_str(c.shape(i)));
}

}  // namespace

OpSchema schema_ArgMax() {
  return arg_extreme();
}
OpSchema schema_ArgMin() {
  return arg_extreme();
}

/// Values and int64 Indices of the k largest (or smallest) elements along
/// `axis`, k a constant; ties keep the lower index first.
OpSchema schema_TopK() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.min_outputs = s.max_outputs = 2;
  s.attrs = {{"axis", AttrType::kInt}, {"largest", AttrType::kInt}, {"sorted", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    Shape out = c.shape(0);
    if (out.empty()) c.fail("input is a scalar: there is no axis to search");
    if (c.dtype(0) == DType::kBool || c.dtype(0) == DType::kF16 || c.dtype(0) == DType::kBF16)
      c.unsupported(std::string("TopK of ") + dtype_name(c.dtype(0)));
    require_int_scalar(c, 1, "K");
    const Tensor* k = c.constant(1);
    if (!k) c.fail("K must be known at import time (static shapes only)");
    const int64_t axis = with_node(c, [&] {
      return normalize_axis(c.node().attr_int("axis", -1), static_cast<int64_t>(out.size()));
    });
    const int64_t kv = k->to_i64().at(0), n = out[static_cast<size_t>(axis)];
    if (kv < 0 || kv > n)
      c.fail("K = " + std::to_string(kv) + " is outside [0, " + std::to_string(n) + "] (axis " +
             std::to_string(axis) + ")");
    out[static_cast<size_t>(axis)] = kv;
    c.set_output(0, c.dtype(0), out);
    c.set_output(1, DType::kI64, out);
  };
  return s;
}

/// Y = running sums of X along the axis input; exclusive leaves the element
/// itself out, reverse runs from the end.
OpSchema schema_CumSum() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"exclusive", AttrType::kInt}, {"reverse", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const int64_t rank = static_cast<int64_t>(c.shape(0).size());
    if (rank == 0) c.fail("input is a scalar");
    if (c.dtype(0) == DType::kBool) c.fail("input is bool");
    require_int_scalar(c, 1, "axis");
    if (const Tensor* a = c.constant(1))
      with_node(c, [&] { return normalize_axis(a->to_i64().at(0), rank); });
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  return s;
}

/// Y = X with the elements outside the upper (or lower) triangle shifted by
/// k zeroed, in each matrix of the last two dims.
OpSchema schema_Trilu() {
  OpSchema s;
  s.max_inputs = 2;
  s.attrs = {{"upper", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    if (c.shape(0).size() < 2) c.fail("input " + shape_str(c.shape(0)) + " has rank below 2");
    if (c.has_input(1)) require_int_scalar(c, 1, "k");
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  return s;
}

/// Y = X repeated `repeats[d]` times along each dim d (repeats: a constant).
OpSchema schema_Tile() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    const std::vector<int64_t> r = c.constant_ints(1);
    if (r.size() != x.size())
      c.fail("repeats has " + std::to_string(r.size()) + " entries for input " + shape_str(x));
    Shape out = x;
    for (size_t d = 0; d < x.size(); ++d) {
      if (r[d] < 0)
        c.fail("repeats " + shape_str(Shape(r.begin(), r.end())) + " has a negative entry");
      out[d] *= r[d];
    }
    c.set_output(0, c.dtype(0), out);
  };
  return s;
}

/// Y = 1 at the first maximum along `axis` (default -1), 0 elsewhere.
OpSchema schema_Hardmax() {
  OpSchema s;
  s.differentiable = false;
  s.attrs = {{"axis", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    if (c.dtype(0) != DType::kF32)
      c.unsupported(std::string("Hardmax of ") + dtype_name(c.dtype(0)));
    if (c.shape(0).empty()) c.fail("input is a scalar");
    with_node(c, [&] {
      return normalize_axis(c.node().attr_int("axis", -1), static_cast<int64_t>(c.shape(0).size()));
    });
    c.set_output(0, DType::kF32, c.shape(0));
  };
  return s;
}

/// A matrix shaped like X with ones on the diagonal shifted by k; the
/// `dtype` attribute (an ONNX type) or X's dtype.
OpSchema schema_EyeLike() {
  OpSchema s;
  s.differentiable = false;
  s.attrs = {{"dtype", AttrType::kInt}, {"k", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    if (c.shape(0).size() != 2) c.fail("input " + shape_str(c.shape(0)) + " is not 2-D");
    DType t = c.dtype(0);
    if (c.node().has_attr("dtype")) {
      t = dtype_from_onnx(static_cast<int>(c.node().attr_int("dtype", 1)));
      if (t == DType::kUndefined || t == DType::kF16 || t == DType::kBF16)
        c.unsupported("dtype " + std::to_string(c.node().attr_int("dtype", 1)));
    }
    c.set_output(0, t, c.shape(0));
  };
  return s;
}

/// One-hot rows of `depth` classes (a constant) inserted at `axis`, with
/// values (off, on).
OpSchema schema_OneHot() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 3;
  s.differentiable = false;
  s.attrs = {{"axis", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const Shape& idx = c.shape(0);
    if (c.dtype(0) == DType::kBool) c.fail("indices are bool");
    const Tensor* d = c.constant(1);
    if (!d || d->numel() != 1)
      c.fail("depth must be one number known at import time (static shapes only)");
    const int64_t depth =
        d->dtype() == DType::kF32 ? static_cast<int64_t>(d->data<float>()[0]) : d->to_i64().at(0);
    if (depth < 1) c.fail("depth " + std::to_string(depth) + " is not positive");
    if (numel(c.shape(2)) != 2) c.fail("values must hold (off, on), got " + shape_str(c.shape(2)));
    const int64_t rank = static_cast<int64_t>(idx.size()) + 1;
    const int64_t axis =
        with_node(c, [&] { return normalize_axis(c.node().attr_int("axis", -1), rank); });
    Shape out = idx;
    out.insert(out.begin() + axis, depth);
    c.set_output(0, c.dtype(2), out);
  };
  return s;
}

/// The element count of X as an int64 scalar.
OpSchema schema_Size() {
  OpSchema s;
  s.differentiable = false;
  s.infer = [](InferContext& c) { c.set_output(0, DType::kI64, {}); };
  return s;
}

}  // namespace pipetrain::ir
