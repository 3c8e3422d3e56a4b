// Schemas of the Reduce* family. Axes come from the `axes`
// attribute (ReduceSum before opset 13, the others before 18) or from the
// optional second input; no axes reduces everything unless
// noop_with_empty_axes = 1, which makes the op an identity.
#include <algorithm>

#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain::ir {

namespace {

OpSchema reduce_schema() {
  OpSchema s;
  s.max_inputs = 2;
  s.attrs = {{"axes", AttrType::kInts},
             {"keepdims", AttrType::kInt},
             {"noop_with_empty_axes", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const Shape& in = c.shape(0);
    const int64_t rank = static_cast<int64_t>(in.size());
    std::vector<int64_t> axes;
    if (c.has_input(1)) {
      if (c.node().has_attr("axes")) c.fail("axes are given both as an attribute and an input");
      if (c.dtype(1) != DType::kI64)
        c.fail(std::string("axes input is ") + dtype_name(c.dtype(1)) + ", expected i64");
      if (c.shape(1).size() > 1) c.fail("axes input must be 1-D, got " + shape_str(c.shape(1)));
      // An empty axes tensor needs no value; otherwise the output shape depends on it.
      if (numel(c.shape(1)) > 0) axes = c.constant_ints(1);
    } else {
      axes = c.node().attr_ints("axes");
    }
    if (axes.empty() && c.node().attr_int("noop_with_empty_axes", 0) != 0) {
      c.set_output(0, c.dtype(0), in);
      return;
    }
    std::vector<bool> reduced(in.size(), axes.empty());
    for (int64_t a : axes) {
      if (a < -rank || a >= rank)
        c.fail("axis " + std::to_string(a) + " is out of range for input shape " + shape_str(in));
      size_t d = static_cast<size_t>(a < 0 ? a + rank : a);
      if (reduced[d]) c.fail("axis " + std::to_string(a) + " is listed twice");
      reduced[d] = true;
    }
    const bool keepdims = c.node().attr_int("keepdims", 1) != 0;
    Shape out;
    for (size_t d = 0; d < in.size(); ++d) {
      if (!reduced[d])
        out.push_back(in[d]);
      else if (keepdims)
        out.push_back(1);
    }
    c.set_output(0, c.dtype(0), out);
  };
  return s;
}

}  // namespace

OpSchema schema_ReduceMean() {
  return reduce_schema();
}
OpSchema schema_ReduceSum() {
  return reduce_schema();
}
OpSchema schema_ReduceMax() {
  return reduce_schema();
}
OpSchema schema_ReduceMin() {
  return reduce_schema();
}
OpSchema schema_ReduceProd() {
  return reduce_schema();
}
OpSchema schema_ReduceL1() {
  return reduce_schema();
}
OpSchema schema_ReduceL2() {
  return reduce_schema();
}
OpSchema schema_ReduceSumSquare() {
  return reduce_schema();
}
OpSchema schema_ReduceLogSum() {
  return reduce_schema();
}
OpSchema schema_ReduceLogSumExp() {
  return reduce_schema();
}

}  // namespace pipetrain::ir
