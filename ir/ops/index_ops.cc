// Shape rules of the ops that select or assemble parts of tensors along axes:
// Concat, Split, Slice, Gather, Pad. Split sizes, slice bounds and pads must
// be constants: shapes are static.
#include <string>

#include "ir/op_registry.h"
#include "ir/ops/data_movement.h"

namespace pipetrain::ir {

OpSchema schema_Concat() {
  OpSchema s;
  s.max_inputs = 1 << 20;
  s.attrs = {{"axis", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    if (!c.node().has_attr("axis")) c.fail("missing required attribute 'axis'");
    const Shape& first = c.shape(0);
    const int64_t rank = static_cast<int64_t>(first.size());
    if (rank == 0) c.fail("cannot concatenate scalars");
    const int64_t axis =
        with_node(c, [&] { return normalize_axis(c.node().attr_int("axis", 0), rank); });
    Shape out = first;
    out[static_cast<size_t>(axis)] = 0;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      if (!c.has_input(i)) c.fail("input " + std::to_string(i) + " is absent");
      const Shape& x = c.shape(i);
      bool ok = x.size() == first.size() && c.dtype(i) == c.dtype(0);
      for (size_t a = 0; ok && a < x.size(); ++a)
        ok = a == static_cast<size_t>(axis) || x[a] == first[a];
      if (!ok)
        c.fail("input " + std::to_string(i) + " " + dtype_name(c.dtype(i)) + " " + shape_str(x) +
               " does not match input 0 " + dtype_name(c.dtype(0)) + " " + shape_str(first) +
               " outside axis " + std::to_string(axis));
      out[static_cast<size_t>(axis)] += x[static_cast<size_t>(axis)];
    }
    c.set_output(0, c.dtype(0), out);
  };
  return s;
}

OpSchema schema_Split() {
  OpSchema s;
  s.max_inputs = 2;
  s.max_outputs = 1 << 20;
  s.attrs = {{"axis", AttrType::kInt}, {"split", AttrType::kInts}, {"num_outputs", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    if (x.empty()) c.fail("cannot split a scalar");
    const int64_t axis = with_node(c, [&] {
      return normalize_axis(c.node().attr_int("axis", 0), static_cast<int64_t>(x.size()));
    });
    const int64_t dim = x[static_cast<size_t>(axis)];
    const int64_t n_out = static_cast<int64_t>(c.num_outputs());
    std::vector<int64_t> sizes;
    if (c.has_input(1) && c.node().has_attr("split"))
      c.fail("split sizes are given both as attribute and as input");
    if (c.has_input(1) || c.node().has_attr("split")) {
      // Explicit sizes: input (opset 13+) or attribute (opset < 13).
      sizes = c.has_input(1) ? c.constant_ints(1) : c.node().attr_ints("split");
      int64_t total = 0;
      for (int64_t v : sizes) {
        if (v < 0) c.fail("split sizes " + shape_str(sizes) + " contain a negative size");
        total += v;
      }
      if (static_cast<int64_t>(sizes.size()) != n_out || total != dim)
        c.fail("split sizes " + shape_str(sizes) + " must be " + std::to_string(n_out) +
               " sizes summing to " + std::to_string(dim) + " (axis " + std::to_string(axis) +
               " of input " + shape_str(x) + ")");
    } else if (c.node().has_attr("num_outputs")) {
      // Opset 18: chunks of ceil(dim / n); the last one takes the remainder.
      const int64_t n = c.node().attr_int("num_outputs", 0);
      if (n < 1 || n != n_out)
        c.fail("num_outputs is " + std::to_string(n) + " but the node has " +
               std::to_string(n_out) + " outputs");
      const int64_t chunk = (dim + n - 1) / n;
      if (chunk * (n - 1) > dim)
        c.fail("cannot split axis " + std::to_string(axis) + " of input " + shape_str(x) +
               " into " + std::to_string(n) + " chunks of " + std::to_string(chunk));
      sizes.assign(static_cast<size_t>(n), chunk);
      sizes.back() = dim - chunk * (n - 1);
    } else {
      if (dim % n_out != 0)
        c.fail("cannot split axis " + std::to_string(axis) + " of input " + shape_str(x) +
               " into " + std::to_string(n_out) + " equal parts");
      sizes.assign(static_cast<size_t>(n_out), dim / n_out);
    }
    for (size_t k = 0; k < sizes.size(); ++k) {
      Shape out = x;
      out[static_cast<size_t>(axis)] = sizes[k];
      c.set_output(k, c.dtype(0), out);
    }
  };
  return s;
}

OpSchema schema_Slice() {
  OpSchema s;
  s.min_inputs = 3;
  s.max_inputs = 5;
  s.infer = [](InferContext& c) {
    const std::vector<int64_t> starts = c.constant_ints(1), ends = c.constant_ints(2);
    const std::vector<int64_t> axes = c.has_input(3) ? c.constant_ints(3) : std::vector<int64_t>{};
    const std::vector<int64_t> steps = c.has_input(4) ? c.constant_ints(4) : std::vector<int64_t>{};
    SliceSpec spec =
        with_node(c, [&] { return resolve_slice(c.shape(0), starts, ends, axes, steps); });
    c.set_output(0, c.dtype(0), spec.out);
  };
  return s;
}

OpSchema schema_Gather() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"axis", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    if (x.empty()) c.fail("cannot gather from a scalar");
    const DType it = c.dtype(1);
    if (it != DType::kI64 && it != DType::kI32)
      c.fail(std::string("indices must be i64 or i32, are ") + dtype_name(it));
    const int64_t axis = with_node(c, [&] {
      return normalize_axis(c.node().attr_int("axis", 0), static_cast<int64_t>(x.size()));
    });
    // out = x[:axis] + indices.shape + x[axis+1:]
    Shape out(x.begin(), x.begin() + axis);
    out.insert(out.end(), c.shape(1).begin(), c.shape(1).end());
    out.insert(out.end(), x.begin() + axis + 1, x.end());
    c.set_output(0, c.dtype(0), out);
  };
  return s;
}

namespace {

/// GatherElements' and ScatterElements' indices: integers of data's rank.
void check_element_indices(InferContext& c, size_t at) {
  const Shape &x = c.shape(0), &idx = c.shape(at);
  if (x.empty()) c.fail("data is a scalar");
  if (c.dtype(at) != DType::kI64 && c.dtype(at) != DType::kI32)
    c.fail(std::string("indices must be i64 or i32, are ") + dtype_name(c.dtype(at)));
  if (idx.size() != x.size())
    c.fail("indices " + shape_str(idx) + " and data " + shape_str(x) + " differ in rank");
  const int64_t axis = with_node(c, [&] {
    return normalize_axis(c.node().attr_int("axis", 0), static_cast<int64_t>(x.size()));
  });
  for (size_t d = 0; d < x.size(); ++d)
    if (d != static_cast<size_t>(axis) && idx[d] > x[d])
      c.fail("indices " + shape_str(idx) + " exceed data " + shape_str(x) + " outside axis " +
             std::to_string(axis));
}

}  // namespace

/// Y[i] = X with index i's coordinate along `axis` replaced by indices[i].
OpSchema schema_GatherElements() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"axis", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    check_element_indices(c, 1);
    c.set_output(0, c.dtype(0), c.shape(1));
  };
  return s;
}

/// Y = data with updates[i] written (or folded by `reduction`) at index i's
/// coordinates with the one along `axis` replaced by indices[i].
OpSchema schema_ScatterElements() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 3;
  s.attrs = {{"axis", AttrType::kInt}, {"reduction", AttrType::kString}};
  s.infer = [](InferContext& c) {
    check_element_indices(c, 1);
    if (c.shape(2) != c.shape(1) || c.dtype(2) != c.dtype(0))
      c.fail("updates " + std::string(dtype_name(c.dtype(2))) + " " + shape_str(c.shape(2)) +
             " do not match indices " + shape_str(c.shape(1)) + " and data " +
             dtype_name(c.dtype(0)));
    const std::string r = c.node().attr_string("reduction", "none");
    if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
      c.fail("unknown reduction '" + r + "' (none, add, mul, max, min)");
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  return s;
}

/// GatherND / ScatterND indices: int64 with a static last dim k; returns k.
int64_t nd_depth(InferContext& c, int64_t batch_dims) {
  const Shape& data = c.shape(0);
  const Shape& idx = c.shape(1);
  if (c.dtype(1) != DType::kI64 && c.dtype(1) != DType::kI32)
    c.fail(std::string("indices are ") + dtype_name(c.dtype(1)) + ", not integers");
  if (idx.empty()) c.fail("indices are a scalar (the last axis holds the coordinates)");
  const int64_t k = idx.back(), rank = static_cast<int64_t>(data.size());
  if (batch_dims < 0 || batch_dims >= static_cast<int64_t>(idx.size()) || batch_dims >= rank)
    c.fail("batch_dims " + std::to_string(batch_dims) + " for data " + shape_str(data) +
           " and indices " + shape_str(idx));
  if (k < 1 || k > rank - batch_dims)
    c.fail("indices " + shape_str(idx) + " address " + std::to_string(k) + " axes of data " +
           shape_str(data) + (batch_dims ? " after its batch axes" : ""));
  for (int64_t d = 0; d < batch_dims; ++d)
    if (idx[static_cast<size_t>(d)] != data[static_cast<size_t>(d)])
      c.fail("batch axis " + std::to_string(d) + " differs: data " + shape_str(data) +
             ", indices " + shape_str(idx));
  return k;
}

/// Y[i..., :] = data[batch..., indices[i...], :]: the slices of data that
/// the rows of indices address; shape indices[:-1] + data[batch_dims + k:].
OpSchema schema_GatherND() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"batch_dims", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const int64_t b = c.node().attr_int("batch_dims", 0);
    const int64_t k = nd_depth(c, b);
    Shape out(c.shape(1).begin(), c.shape(1).end() - 1);
    out.insert(out.end(), c.shape(0).begin() + b + k, c.shape(0).end());
    c.set_output(0, c.dtype(0), out);
  };
  return s;
}

/// Y = data with the slices the rows of indices address replaced by (or
/// folded with) updates, of shape indices[:-1] + data[k:].
OpSchema schema_ScatterND() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 3;
  s.attrs = {{"reduction", AttrType::kString}};
  s.infer = [](InferContext& c) {
    const int64_t k = nd_depth(c, 0);
    Shape want(c.shape(1).begin(), c.shape(1).end() - 1);
    want.insert(want.end(), c.shape(0).begin() + k, c.shape(0).end());
    if (c.shape(2) != want || c.dtype(2) != c.dtype(0))
      c.fail("updates " + std::string(dtype_name(c.dtype(2))) + " " + shape_str(c.shape(2)) +
             " are not " + dtype_name(c.dtype(0)) + " " + shape_str(want));
    const std::string r = c.node().attr_string("reduction", "none");
    if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
      c.fail("unknown reduction '" + r + "' (none, add, mul, max, min)");
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  return s;
}

OpSchema schema_Pad() {
  OpSchema s;
  s.min_inputs = 2;
  s.max_inputs = 4;
  s.attrs = {{"mode", AttrType::kString}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    const PadMode mode = with_node(
        c, [&] { return pad_mode_from_string(c.node().attr_string("mode", "constant")); });
    if (c.has_input(2)) {
      if (c.dtype(2) != c.dtype(0))
        c.fail(std::string("constant_value is ") + dtype_name(c.dtype(2)) + ", data is " +
               dtype_name(c.dtype(0)));
      if (numel(c.shape(2)) != 1)
        c.fail("constant_value must hold one element, has shape " + shape_str(c.shape(2)));
    }
    const std::vector<int64_t> pads = c.constant_ints(1);
    const std::vector<int64_t> axes = c.has_input(3) ? c.constant_ints(3) : std::vector<int64_t>{};
    PadSpec spec = with_node(c, [&] { return resolve_pads(x, pads, axes, mode); });
    c.set_output(0, c.dtype(0), spec.out);
  };
  return s;
}

}  // namespace pipetrain::ir
