// Schemas of the elementwise ops: numpy-broadcast binaries, comparisons,
// variadic Max/Min, unaries, Where and Cast.
#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain::ir {

namespace {

/// Broadcast of inputs [0, n) with the node named in the message.
Shape broadcast_inputs(InferContext& c, size_t n) {
  Shape out = c.shape(0);
  for (size_t i = 1; i < n; ++i) {
    try {
      out = broadcast_shapes(out, c.shape(i));
    } catch (const ModelError&) {
      std::string shapes;
      for (size_t k = 0; k < n; ++k) shapes += (k ? ", " : "") + shape_str(c.shape(k));
      c.fail("input shapes " + shapes + " do not broadcast");
    }
  }
  return out;
}

void require_same_dtype(InferContext& c, size_t n) {
  for (size_t i = 1; i < n; ++i)
    if (c.dtype(i) != c.dtype(0))
      c.fail("input " + std::to_string(i) + " is " + dtype_name(c.dtype(i)) + " but input 0 is " +
             dtype_name(c.dtype(0)));
}

/// A two-input op whose inputs share a dtype; the output has `out` dtype, or
/// the inputs' dtype when out is kUndefined.
OpSchema binary(DType out = DType::kUndefined, bool differentiable = true) {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.differentiable = differentiable;
  s.infer = [out](InferContext& c) {
    require_same_dtype(c, 2);
    c.set_output(0, out == DType::kUndefined ? c.dtype(0) : out, broadcast_inputs(c, 2));
  };
  return s;
}

OpSchema variadic() {
  OpSchema s;
  s.min_inputs = 1;
  s.max_inputs = 1 << 20;
  s.infer = [](InferContext& c) {
    require_same_dtype(c, c.num_inputs());
    c.set_output(0, c.dtype(0), broadcast_inputs(c, c.num_inputs()));
  };
  return s;
}

OpSchema unary(bool differentiable = true) {
  OpSchema s;
  s.differentiable = differentiable;
  s.infer = [](InferContext& c) { c.set_output(0, c.dtype(0), c.shape(0)); };
  return s;
}

}  // namespace

OpSchema schema_Add() {
  return binary();
}
OpSchema schema_Sub() {
  return binary();
}
OpSchema schema_Mul() {
  return binary();
}
/// Integer Div truncates towards zero (C semantics).
OpSchema schema_Div() {
  return binary();
}

/// Y = X ^ E; E may have another dtype than X, Y takes X's.
OpSchema schema_Pow() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.infer = [](InferContext& c) {
    for (DType t : {c.dtype(0), c.dtype(1)})
      if (t == DType::kBool) c.fail("Pow does not take bool inputs");
    c.set_output(0, c.dtype(0), broadcast_inputs(c, 2));
  };
  return s;
}

OpSchema schema_Equal() {
  return binary(DType::kBool, false);
}
OpSchema schema_Less() {
  return binary(DType::kBool, false);
}
OpSchema schema_Greater() {
  return binary(DType::kBool, false);
}
OpSchema schema_GreaterOrEqual() {
  return binary(DType::kBool, false);
}
OpSchema schema_LessOrEqual() {
  return binary(DType::kBool, false);
}
/// Integer or float remainder; fmod = 1 takes the dividend's sign, fmod = 0
/// (the default) the divisor's.
OpSchema schema_Mod() {
  OpSchema s = binary();
  s.attrs = {{"fmod", AttrType::kInt}};
  return s;
}

/// Y = X < 0 ? slope X : X, slope broadcast onto X (one direction only).
OpSchema schema_PRelu() {
  OpSchema s = binary();
  auto infer = s.infer;
  s.infer = [infer](InferContext& c) {
    infer(c);
    if (c.outputs().at(0).second != c.shape(0))
      c.fail("slope " + shape_str(c.shape(1)) + " does not broadcast onto input " +
             shape_str(c.shape(0)));
  };
  return s;
}

/// Logical And/Or/Xor of two bool tensors.
static OpSchema logical() {
  OpSchema s = binary(DType::kBool, false);
  auto infer = s.infer;
  s.infer = [infer](InferContext& c) {
    for (size_t i = 0; i < 2; ++i)
      if (c.dtype(i) != DType::kBool)
        c.fail("input " + std::to_string(i) + " is " + dtype_name(c.dtype(i)) + ", expected bool");
    infer(c);
  };
  return s;
}
OpSchema schema_And() {
  return logical();
}
OpSchema schema_Or() {
  return logical();
}
OpSchema schema_Xor() {
  return logical();
}

/// Sum and Mean of 1..N broadcast inputs, in input order.
OpSchema schema_Sum() {
  return variadic();
}
OpSchema schema_Mean() {
  OpSchema s = variadic();
  auto infer = s.infer;
  s.infer = [infer](InferContext& c) {
    if (!is_float(c.dtype(0))) c.fail(std::string("Mean of ") + dtype_name(c.dtype(0)) + " inputs");
    infer(c);
  };
  return s;
}

OpSchema schema_Max() {
  return variadic();
}
OpSchema schema_Min() {
  return variadic();
}

OpSchema schema_Sqrt() {
  return unary();
}
OpSchema schema_Neg() {
  return unary();
}
OpSchema schema_Exp() {
  return unary();
}
OpSchema schema_Log() {
  return unary();
}
OpSchema schema_Reciprocal() {
  return unary();
}
OpSchema schema_Abs() {
  return unary();
}
OpSchema schema_Erf() {
  return unary();
}
OpSchema schema_Sin() {
  return unary();
}
OpSchema schema_Cos() {
  return unary();
}
OpSchema schema_Tan() {
  return unary();
}
OpSchema schema_Asin() {
  return unary();
}
OpSchema schema_Acos() {
  return unary();
}
OpSchema schema_Atan() {
  return unary();
}
OpSchema schema_Sinh() {
  return unary();
}
OpSchema schema_Cosh() {
  return unary();
}
OpSchema schema_Asinh() {
  return unary();
}
OpSchema schema_Acosh() {
  return unary();
}
OpSchema schema_Atanh() {
  return unary();
}

OpSchema schema_Shrink() {
  OpSchema s = unary();
  s.attrs = {{"lambd", AttrType::kFloat}, {"bias", AttrType::kFloat}};
  return s;
}

/// Float tests giving bool: IsNaN, and IsInf for the signs asked for.
static OpSchema float_test() {
  OpSchema s;
  s.differentiable = false;
  s.infer = [](InferContext& c) {
    if (!is_float(c.dtype(0)))
      c.fail(std::string("input is ") + dtype_name(c.dtype(0)) + ", expected a float type");
    c.set_output(0, DType::kBool, c.shape(0));
  };
  return s;
}
OpSchema schema_IsNaN() {
  return float_test();
}
OpSchema schema_IsInf() {
  OpSchema s = float_test();
  s.attrs = {{"detect_negative", AttrType::kInt}, {"detect_positive", AttrType::kInt}};
  return s;
}
// Piecewise constant: no gradient flows through them (PyTorch's is zero).
OpSchema schema_Floor() {
  return unary(false);
}
OpSchema schema_Ceil() {
  return unary(false);
}
/// Halves to even, as ONNX specifies.
OpSchema schema_Round() {
  return unary(false);
}
OpSchema schema_Sign() {
  return unary(false);
}

OpSchema schema_Not() {
  OpSchema s = unary(false);
  s.infer = [](InferContext& c) {
    if (c.dtype(0) != DType::kBool)
      c.fail(std::string("input is ") + dtype_name(c.dtype(0)) + ", expected bool");
    c.set_output(0, DType::kBool, c.shape(0));
  };
  return s;
}

/// Y = condition ? X : Y, all three broadcast together.
OpSchema schema_Where() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 3;
  s.infer = [](InferContext& c) {
    if (c.dtype(0) != DType::kBool)
      c.fail(std::string("condition is ") + dtype_name(c.dtype(0)) + ", expected bool");
    if (c.dtype(1) != c.dtype(2))
      c.fail(std::string("X is ") + dtype_name(c.dtype(1)) + " but Y is " + dtype_name(c.dtype(2)));
    c.set_output(0, c.dtype(1), broadcast_inputs(c, 3));
  };
  return s;
}

/// `saturate` (opset 19) only changes float8 conversions, which pipetrain has
/// no dtype for, so it is accepted and has no effect.
OpSchema schema_Cast() {
  OpSchema s;
  s.attrs = {{"to", AttrType::kInt}, {"saturate", AttrType::kInt}};
  s.infer = [](InferContext& c) {
    if (!c.node().has_attr("to")) c.fail("attribute 'to' is required");
    int64_t to = c.node().attr_int("to", 0);
    DType t = dtype_from_onnx(static_cast<int>(to));
    if (t == DType::kUndefined)
      c.unsupported("cast to ONNX type " + std::to_string(to) +
                    " is not supported (f32, f16, bf16, i64, i32 and bool are)");
    c.set_output(0, t, c.shape(0));
  };
  return s;
}

/// Cast to the dtype of input 1 (whose values are not read).
OpSchema schema_CastLike() {
  OpSchema s;
  s.min_inputs = s.max_inputs = 2;
  s.attrs = {{"saturate", AttrType::kInt}};
  s.infer = [](InferContext& c) { c.set_output(0, c.dtype(1), c.shape(0)); };
  return s;
}

}  // namespace pipetrain::ir
