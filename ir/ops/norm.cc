// BatchNormalization (inference and training mode) and LayerNormalization.
#include <string>

#include "ir/op_registry.h"

namespace pipetrain::ir {

// Inference: Y = (X - mean) / sqrt(var + epsilon) * scale + B per channel
// (axis 1). training_mode = 1 normalises with the batch statistics over
// (N, D...) (biased variance) and outputs running_mean / running_var =
// momentum * input + (1 - momentum) * batch statistic.
OpSchema schema_BatchNormalization() {
  OpSchema s;
  s.min_inputs = 5;
  // pipetrain's own input 5 and activation (ir/passes/fusion.h): a tensor of
  // Y's shape added to the normalised X, then the ReLU, as one node.
  s.max_inputs = 6;
  s.max_outputs = 3;
  s.attrs = {{"epsilon", AttrType::kFloat},
             {"momentum", AttrType::kFloat},
             {"training_mode", AttrType::kInt},
             {"activation", AttrType::kString}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    if (x.size() < 2) c.fail("input X " + shape_str(x) + " must be (N, C, D...)");
    const std::string activation = c.node().attr_string("activation", "");
    if (!activation.empty() && activation != "Relu")
      c.fail("activation '" + activation + "' is not supported (Relu only)");
    if (c.has_input(5) && (c.shape(5) != x || c.dtype(5) != c.dtype(0)))
      c.fail("the residual input " + shape_str(c.shape(5)) + " must have X's shape " +
             shape_str(x) + " and dtype");
    static const char* kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (size_t i = 1; i < 5; ++i) {
      if (c.shape(i) != Shape{x[1]})
        c.fail(std::string(kNames[i]) + " " + shape_str(c.shape(i)) + " must be (" +
               std::to_string(x[1]) + ") for X " + shape_str(x));
      if (c.dtype(i) != c.dtype(0))
        c.unsupported(std::string(kNames[i]) + " must have the dtype of X (mixed precision)");
    }
    bool training = c.node().attr_int("training_mode", 0) != 0;
    bool stats_out = c.node().has_output(1) || c.node().has_output(2);
    if (stats_out && !training)
      c.unsupported(
          "outputs running_mean / running_var need training_mode = 1 (opset 14+); "
          "the opset < 14 training outputs are not supported");
    c.set_output(0, c.dtype(0), x);
    if (c.num_outputs() > 1) c.set_output(1, c.dtype(0), {x[1]});
    if (c.num_outputs() > 2) c.set_output(2, c.dtype(0), {x[1]});
  };
  return s;
}

// Over the axes [axis, rank): Mean = mean(X), InvStdDev = 1 / sqrt(var(X) +
// epsilon) (biased), Y = (X - Mean) * InvStdDev * Scale + B, Scale and B
// broadcast to the normalised shape X[axis:].
OpSchema schema_LayerNormalization() {
  OpSchema s;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.max_outputs = 3;
  s.attrs = {
      {"axis", AttrType::kInt}, {"epsilon", AttrType::kFloat}, {"stash_type", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const Shape& x = c.shape(0);
    int64_t rank = static_cast<int64_t>(x.size());
    if (rank < 1) c.fail("input X must have rank >= 1");
    int64_t axis = c.node().attr_int("axis", -1);
    if (axis < -rank || axis >= rank)
      c.fail("axis " + std::to_string(axis) + " is out of range for X " + shape_str(x));
    if (axis < 0) axis += rank;
    if (c.node().attr_int("stash_type", 1) != 1)
      c.unsupported("stash_type " + std::to_string(c.node().attr_int("stash_type", 1)) +
                    " (only 1: float statistics)");
    for (size_t i = 1; i < 3; ++i) {
      if (!c.has_input(i)) continue;
      const Shape& p = c.shape(i);
      bool ok = p.size() <= x.size() && c.dtype(i) == c.dtype(0);
      for (size_t j = 0; ok && j < p.size(); ++j) {
        int64_t xi = static_cast<int64_t>(x.size() - p.size() + j);
        ok = p[j] == 1 || (xi >= axis && p[j] == x[static_cast<size_t>(xi)]);
      }
      if (!ok)
        c.fail(std::string(i == 1 ? "Scale " : "B ") + dtype_name(c.dtype(i)) + " " + shape_str(p) +
               " does not broadcast to the normalised shape of X " + shape_str(x) + " from axis " +
               std::to_string(axis));
    }
    Shape stats = x;
    for (int64_t i = axis; i < rank; ++i) stats[static_cast<size_t>(i)] = 1;
    c.set_output(0, c.dtype(0), x);
    if (c.num_outputs() > 1) c.set_output(1, DType::kF32, stats);
    if (c.num_outputs() > 2) c.set_output(2, DType::kF32, stats);
  };
  return s;
}

}  // namespace pipetrain::ir
