// PLACEHOLDER: replaced by the real schemas of this family.
#include "ir/op_registry.h"

namespace pipetrain::ir {

OpSchema schema_Flatten() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Reshape() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Transpose() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Concat() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Split() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Slice() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Gather() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Squeeze() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Unsqueeze() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Expand() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Pad() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Identity() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Shape() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Constant() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_ConstantOfShape() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Range() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

}  // namespace pipetrain::ir
