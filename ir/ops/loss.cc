// Schemas of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss. Scores
// are (N, C) or (N, C, d1, ..., dk), labels (N) or (N, d1, ..., dk) of i64 or
// i32, optional weights (C). reduction = none gives a loss per label
// (labels' shape), sum and mean a scalar; mean with weights (or ignore_index)
// divides by the sum of the weights applied, as ONNX specifies.
#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain::ir {

namespace {

OpSchema loss_schema(int max_outputs) {
  OpSchema s;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.max_outputs = max_outputs;
  s.attrs = {{"reduction", AttrType::kString}, {"ignore_index", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    const Shape& t = c.shape(1);
    if (!is_float(c.dtype(0)))
      c.fail(std::string("scores are ") + dtype_name(c.dtype(0)) + ", expected a float type");
    if (x.size() < 2) c.fail("scores must be (N, C, ...), got " + shape_str(x));
    if (c.dtype(1) != DType::kI64 && c.dtype(1) != DType::kI32)
      c.fail(std::string("labels are ") + dtype_name(c.dtype(1)) + ", expected i64 or i32");
    Shape expect = x;
    expect.erase(expect.begin() + 1);
    if (t != expect)
      c.fail("labels have shape " + shape_str(t) + " but scores " + shape_str(x) + " need " +
             shape_str(expect));
    if (c.has_input(2)) {
      if (c.shape(2) != Shape{x[1]})
        c.fail("weights have shape " + shape_str(c.shape(2)) + ", expected (" +
               std::to_string(x[1]) + ")");
      if (c.dtype(2) != c.dtype(0))
        c.fail(std::string("weights are ") + dtype_name(c.dtype(2)) + " but scores are " +
               dtype_name(c.dtype(0)));
    }
    const std::string r = c.node().attr_string("reduction", "mean");
    if (r != "none" && r != "sum" && r != "mean")
      c.fail("reduction '" + r + "' is not one of none, sum, mean");
    c.set_output(0, c.dtype(0), r == "none" ? t : Shape{});
    if (c.num_outputs() > 1) c.set_output(1, c.dtype(0), x);
  };
  return s;
}

}  // namespace

/// Outputs (loss, log_prob?): log_prob = log_softmax(scores) along axis 1.
OpSchema schema_SoftmaxCrossEntropyLoss() {
  return loss_schema(2);
}
OpSchema schema_NegativeLogLikelihoodLoss() {
  return loss_schema(1);
}

}  // namespace pipetrain::ir
