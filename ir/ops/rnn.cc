// LSTM (ONNX gate order i, o, f, c; default activations only).
#include <string>

#include "ir/op_registry.h"

namespace pipetrain::ir {

// Per direction and step, with X_t (batch, I), H, C (batch, hidden):
//   i = sigmoid(X_t W_i^T + H R_i^T + Wb_i + Rb_i + P_i * C)
//   f = sigmoid(X_t W_f^T + H R_f^T + Wb_f + Rb_f + P_f * C)   (1 - i with input_forget)
//   g = tanh(X_t W_c^T + H R_c^T + Wb_c + Rb_c)
//   C' = f * C + i * g
//   o = sigmoid(X_t W_o^T + H R_o^T + Wb_o + Rb_o + P_o * C')
//   H' = o * tanh(C')
// clip bounds the activations' inputs to [-clip, clip]. Layout 0: X (T, batch,
// I), Y (T, dirs, batch, hidden), Y_h / Y_c (dirs, batch, hidden); layout 1:
// X (batch, T, I), Y (batch, T, dirs, hidden), Y_h / Y_c (batch, dirs, hidden).
OpSchema schema_LSTM() {
  OpSchema s;
  s.min_inputs = 3;
  s.max_inputs = 8;
  s.min_outputs = 1;
  s.max_outputs = 3;
  s.attrs = {{"activation_alpha", AttrType::kFloats}, {"activation_beta", AttrType::kFloats},
             {"activations", AttrType::kStrings},     {"clip", AttrType::kFloat},
             {"direction", AttrType::kString},        {"hidden_size", AttrType::kInt},
             {"input_forget", AttrType::kInt},        {"layout", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    const Node& n = c.node();
    std::string direction = n.attr_string("direction", "forward");
    if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
      c.fail("direction '" + direction + "' is not forward, reverse or bidirectional");
    int64_t dirs = direction == "bidirectional" ? 2 : 1;
    int64_t layout = n.attr_int("layout", 0);
    if (layout != 0 && layout != 1) c.fail("layout must be 0 or 1");
    if (n.has_attr("activations")) {
      std::vector<std::string> acts = n.attr_strings("activations");
      bool ok = static_cast<int64_t>(acts.size()) == 3 * dirs;
      for (size_t i = 0; ok && i < acts.size(); ++i)
        ok = acts[i] == (i % 3 == 0 ? "Sigmoid" : "Tanh");
      if (!ok) c.unsupported("only the default activations (Sigmoid, Tanh, Tanh) are supported");
    }
    if (!n.attr_floats("activation_alpha").empty() || !n.attr_floats("activation_beta").empty())
      c.unsupported("activation_alpha / activation_beta (only default activations)");
    if (n.has_attr("clip") && n.attr_float("clip", 0.0f) <= 0.0f) c.fail("clip must be positive");

    const Shape& x = c.shape(0);
    const Shape& r = c.shape(2);
    if (x.size() != 3) c.fail("X " + shape_str(x) + " must have rank 3");
    int64_t seq = layout == 0 ? x[0] : x[1], batch = layout == 0 ? x[1] : x[0], in = x[2];
    int64_t hidden = n.attr_int("hidden_size", r.size() == 3 ? r[2] : -1);
    if (hidden < 1) c.fail("hidden_size must be positive");
    auto expect = [&](size_t i, const char* name, const Shape& want, DType dtype) {
      if (!c.has_input(i)) return;
      if (c.shape(i) != want)
        c.fail(std::string(name) + " " + shape_str(c.shape(i)) + " must be " + shape_str(want) +
               " for X " + shape_str(x) + ", hidden_size " + std::to_string(hidden) + ", " +
               direction);
      if (c.dtype(i) != dtype && !(i == 4 && c.dtype(i) == DType::kI64))
        c.fail(std::string(name) + " must be " + dtype_name(dtype));
    };
    DType t = c.dtype(0);
    Shape state = layout == 0 ? Shape{dirs, batch, hidden} : Shape{batch, dirs, hidden};
    expect(1, "W", {dirs, 4 * hidden, in}, t);
    expect(2, "R", {dirs, 4 * hidden, hidden}, t);
    expect(3, "B", {dirs, 8 * hidden}, t);
    expect(4, "sequence_lens", {batch}, DType::kI32);
    expect(5, "initial_h", state, t);
    expect(6, "initial_c", state, t);
    expect(7, "P", {dirs, 3 * hidden}, t);
    Shape y = layout == 0 ? Shape{seq, dirs, batch, hidden} : Shape{batch, seq, dirs, hidden};
    c.set_output(0, t, y);
    c.set_output(1, t, state);
    c.set_output(2, t, state);
  };
  return s;
}

}  // namespace pipetrain::ir
