// ir::Graph -> ONNX ModelProto, written atomically (temp file + rename).
// Values become initializers, except float constants, which become Constant
// nodes: the importer turns float initializers into parameters, so this keeps
// every value's role across an export/import round trip.
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <climits>

#include "importer/internal.h"
#include "importer/model_file.h"
#include "ir/error.h"
#include "ir/passes/fusion.h"

namespace pipetrain::importer {

namespace detail {

namespace {

constexpr int64_t kIrVersion = 8;

void set_type(onnx::ValueInfoProto* vi, const ir::TensorDesc& d) {
  vi->set_name(d.name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(d.dtype));
  auto* shape = tt->mutable_shape();
  for (int64_t dim : d.shape) shape->add_dim()->set_dim_value(dim);
}

void set_attribute(onnx::AttributeProto* a, const std::string& key, const ir::Attribute& v) {
  using A = onnx::AttributeProto;
  a->set_name(key);
  switch (ir::attr_type(v)) {
    case ir::AttrType::kInt:
      a->set_type(A::INT);
      a->set_i(std::get<int64_t>(v));
      break;
    case ir::AttrType::kFloat:
      a->set_type(A::FLOAT);
      a->set_f(std::get<float>(v));
      break;
    case ir::AttrType::kString:
      a->set_type(A::STRING);
      a->set_s(std::get<std::string>(v));
      break;
    case ir::AttrType::kInts:
      a->set_type(A::INTS);
      for (int64_t x : std::get<std::vector<int64_t>>(v)) a->add_ints(x);
      break;
    case ir::AttrType::kFloats:
      a->set_type(A::FLOATS);
      for (float x : std::get<std::vector<float>>(v)) a->add_floats(x);
      break;
    case ir::AttrType::kStrings:
      a->set_type(A::STRINGS);
      for (const auto& x : std::get<std::vector<std::string>>(v)) a->add_strings(x);
      break;
    case ir::AttrType::kTensor:
      a->set_type(A::TENSOR);
      tensor_to_proto(std::get<ir::Tensor>(v), "", a->mutable_t());
      break;
  }
}

}  // namespace

onnx::ModelProto model_from_graph(const ir::Graph& fused) {
  // pipetrain's own fused Conv and BatchNorm epilogues go out as the
  // standard nodes they stand for.
  ir::Graph g = fused;
  ir::passes::split_fused_epilogues(g);
  onnx::ModelProto m;
  m.set_ir_version(kIrVersion);
  m.set_producer_name("pipetrain");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(g.opset);
  auto* gp = m.mutable_graph();
  gp->set_name(g.name.empty() ? "pipetrain" : g.name);
  for (const auto& in : g.inputs) set_type(gp->add_input(), g.tensor(in));
  std::set<std::string> node_names;
  for (const auto& node : g.nodes) node_names.insert(node.name);
  for (const auto& [name, value] : g.values()) {
    const ir::TensorDesc& d = g.tensor(name);
    if (d.role == ir::Role::kConstant && ir::is_float(value.dtype())) {
      std::string node_name = name + "_Constant";
      for (int k = 1; node_names.count(node_name); ++k)
        node_name = name + "_Constant_" + std::to_string(k);
      node_names.insert(node_name);
      auto* n = gp->add_node();
      n->set_op_type("Constant");
      n->set_name(node_name);
      n->add_output(name);
      set_attribute(n->add_attribute(), "value", value);
    } else {
      tensor_to_proto(value, name, gp->add_initializer());
    }
  }
  for (const auto& node : g.nodes) {
    auto* n = gp->add_node();
    n->set_name(node.name);
    n->set_op_type(node.op_type);
    for (const auto& i : node.inputs) n->add_input(i);
    for (const auto& o : node.outputs) n->add_output(o);
    for (const auto& [key, value] : node.attrs) set_attribute(n->add_attribute(), key, value);
  }
  for (const auto& out : g.outputs) set_type(gp->add_output(), g.tensor(out));
  return m;
}

}  // namespace detail

void write_model_file(const onnx::ModelProto& model, const std::string& path) {
  namespace fs = std::filesystem;
  if (model.ByteSizeLong() > static_cast<size_t>(INT_MAX))
    throw ModelError(path +
                     ": the model is larger than 2 GiB, which one protobuf file cannot hold");
  fs::path target(path);
  fs::path tmp = target;
  tmp += ".tmp" + std::to_string(::getpid());  // concurrent writers of one path do not collide
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw ModelError(path + ": cannot open '" + tmp.string() + "' for writing");
    bool ok = model.SerializeToOstream(&out);
    out.close();
    if (!ok || !out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw ModelError(path + ": writing the model failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw ModelError(path + ": cannot move the temporary file into place: " + ec.message());
  }
}

void export_model(const ir::Graph& graph, const std::string& path) {
  write_model_file(detail::model_from_graph(graph), path);
}

void save_trained_weights(const std::string& original, const ir::Graph& trained,
                          const std::string& path) {
  onnx::ModelProto model;
  if (!model.ParseFromString(detail::read_file(original)))
    throw ModelError(original + ": not a valid ONNX model");
  const std::string base_dir = std::filesystem::path(original).parent_path().string();
  auto* graph = model.mutable_graph();
  for (auto& init : *graph->mutable_initializer()) {
    const ir::Tensor* v = trained.value(init.name());
    const ir::TensorDesc* d =
        trained.has_tensor(init.name()) ? &trained.tensor(init.name()) : nullptr;
    bool trainable = d && (d->role == ir::Role::kParam || d->role == ir::Role::kBuffer);
    const std::string name = init.name();         // tensor_to_proto clears the proto first
    const int32_t file_dtype = init.data_type();  // float64 goes back as float64
    if (trainable && v) {
      detail::tensor_to_proto(*v, name, &init, file_dtype);
    } else if (init.data_location() == onnx::TensorProto::EXTERNAL) {
      // Inline every tensor, so the written model stands on its own: its
      // bytes as stored (a float64 constant is not rounded to float32).
      detail::inline_external_data(&init, base_dir, "initializer '" + name + "'");
    }
  }
  write_model_file(model, path);
}

}  // namespace pipetrain::importer
