// float16 and bfloat16 model files trained with float32 master weights: the
// ModelProto is widened before import (initializers, Constant values, input,
// output and value types, dtype attributes, in bodies too), so the model
// trains in float32; save_trained_weights rounds the weights back to the
// file's dtype. `pipetrain run` computes such models in float32 too; the
// node tests import without it and keep the file's own precision.
#include "importer/internal.h"
#include "ir/dtype.h"

namespace pipetrain::importer::detail {

namespace {

bool is_half(int32_t t) {
  return t == onnx::TensorProto::FLOAT16 || t == onnx::TensorProto::BFLOAT16;
}

void widen_tensor(onnx::TensorProto* t, const std::string& base_dir, const std::string& what) {
  if (!is_half(t->data_type())) return;
  const ir::Tensor half = tensor_from_proto(*t, base_dir, what);
  ir::Tensor wide(ir::DType::kF32, half.shape());
  const bool bf16 = half.dtype() == ir::DType::kBF16;
  for (int64_t i = 0; i < half.numel(); ++i) {
    const uint16_t bits = half.data<uint16_t>()[i];
    wide.data<float>()[i] = bf16 ? ir::bf16_to_f32(bits) : ir::f16_to_f32(bits);
  }
  const std::string name = t->name();  // tensor_to_proto clears the proto first
  tensor_to_proto(wide, name, t);
}

void widen_type(onnx::TypeProto* type) {
  if (type->has_tensor_type() && is_half(type->tensor_type().elem_type()))
    type->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
}

void widen_graph(onnx::GraphProto* g, const std::string& base_dir) {
  for (auto& init : *g->mutable_initializer())
    widen_tensor(&init, base_dir, "initializer '" + init.name() + "'");
  for (auto* list : {g->mutable_input(), g->mutable_output(), g->mutable_value_info()})
    for (auto& vi : *list) widen_type(vi.mutable_type());
  for (auto& n : *g->mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.type() == onnx::AttributeProto::TENSOR)
        widen_tensor(a.mutable_t(), base_dir,
                     "node '" + n.name() + "' attribute '" + a.name() + "'");
      else if (a.type() == onnx::AttributeProto::GRAPH)
        widen_graph(a.mutable_g(), base_dir);
      else if (a.type() == onnx::AttributeProto::INT && is_half(static_cast<int32_t>(a.i())) &&
               (a.name() == "to" || a.name() == "dtype" || a.name() == "output_datatype"))
        a.set_i(onnx::TensorProto::FLOAT);
    }
  }
}

}  // namespace

void widen_half_floats(onnx::ModelProto* model, const std::string& base_dir) {
  if (model->has_graph()) widen_graph(model->mutable_graph(), base_dir);
}

}  // namespace pipetrain::importer::detail
