// PLACEHOLDER: replaced by the real schemas of this family.
#include "ir/op_registry.h"

namespace pipetrain::ir {

OpSchema schema_LSTM() {
  OpSchema s;
  s.max_inputs = 8;
  s.max_outputs = 8;
  s.infer = [](InferContext& c) { c.unsupported("not implemented yet"); };
  return s;
}

}  // namespace pipetrain::ir
