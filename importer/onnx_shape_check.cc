// Cross-check of our shape rules against libonnx's shape inference: with the
// graph inputs bound to our static shapes, every tensor libonnx infers fully
// must have the shape and dtype we inferred. A disagreement is a bug in a
// schema or a model that lies about itself; either way the user hears of it
// at import, naming the node, not as wrong numbers later.
#include <onnx/shape_inference/implementation.h>

#include "importer/internal.h"
#include "ir/error.h"

namespace pipetrain::importer::detail {

namespace {

bool static_shape(const onnx::TypeProto& t, ir::Shape* out) {
  if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return false;
  out->clear();
  for (const auto& d : t.tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0) return false;
    out->push_back(d.dim_value());
  }
  return true;
}

}  // namespace

void check_against_onnx_shapes(onnx::ModelProto& model, const ir::Graph& g) {
  auto* gp = model.mutable_graph();
  gp->clear_value_info();  // exporters' annotations may be stale; compare inference only
  for (auto& vi : *gp->mutable_input()) {
    if (!g.has_tensor(vi.name()) || g.tensor(vi.name()).role != ir::Role::kInput) continue;
    auto* shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : g.tensor(vi.name()).shape) shape->add_dim()->set_dim_value(d);
  }
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (const std::exception&) {
    return;  // libonnx could not infer (or merge): nothing to compare against
  }
  auto producers = g.producers();
  auto compare = [&](const onnx::ValueInfoProto& vi) {
    ir::Shape theirs;
    if (!g.has_tensor(vi.name()) || !static_shape(vi.type(), &theirs)) return;
    const ir::TensorDesc& ours = g.tensor(vi.name());
    ir::DType their_dtype = ir::dtype_from_onnx(vi.type().tensor_type().elem_type());
    bool dtype_differs = their_dtype != ir::DType::kUndefined && their_dtype != ours.dtype;
    if (theirs == ours.shape && !dtype_differs) return;
    auto p = producers.find(vi.name());
    std::string where =
        p != producers.end() ? g.nodes[p->second].describe() + ": output" : std::string("tensor");
    throw ModelError(where + " '" + vi.name() + "' is " + ir::dtype_name(ours.dtype) + " " +
                     ir::shape_str(ours.shape) + " by pipetrain's shape rules but " +
                     (their_dtype == ir::DType::kUndefined ? "?" : ir::dtype_name(their_dtype)) +
                     " " + ir::shape_str(theirs) + " by ONNX shape inference");
  };
  for (const auto& vi : gp->value_info()) compare(vi);
  for (const auto& vi : gp->output()) compare(vi);
}

}  // namespace pipetrain::importer::detail
