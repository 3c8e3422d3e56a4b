// PLACEHOLDER: replaced by the real schemas of this family.
#include "ir/op_registry.h"

namespace pipetrain::ir {

OpSchema schema_Add() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Sub() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Mul() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Div() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Pow() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Equal() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Less() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Greater() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Max() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Min() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Sqrt() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Neg() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Exp() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Log() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Reciprocal() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Abs() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Erf() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Not() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Where() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Cast() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

}  // namespace pipetrain::ir
