// PLACEHOLDER: replaced by the real schemas of this family.
#include "ir/op_registry.h"

namespace pipetrain::ir {

OpSchema schema_Relu() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_LeakyRelu() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Sigmoid() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Tanh() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Gelu() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Clip() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Softmax() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_LogSoftmax() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

OpSchema schema_Dropout() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

}  // namespace pipetrain::ir
