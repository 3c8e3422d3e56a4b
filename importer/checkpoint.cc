#include "importer/checkpoint.h"

#include <cstring>

#include <onnx/onnx_pb.h>

#include "importer/internal.h"
#include "importer/model_file.h"
#include "ir/error.h"

namespace pipetrain::importer {

namespace {

constexpr const char* kRoleKey = "pipetrain.role.";  // metadata per value: its role
constexpr const char* kMarker = "pipetrain.checkpoint";

const char* role_tag(ir::Role r) {
  switch (r) {
    case ir::Role::kParam: return "param";
    case ir::Role::kBuffer: return "buffer";
    default: return "optimizer_state";
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const ir::Graph& g,
                     const std::map<std::string, std::string>& meta) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("pipetrain");
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* graph = m.mutable_graph();
  graph->set_name("checkpoint");
  auto put_meta = [&](const std::string& k, const std::string& v) {
    auto* p = m.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  };
  put_meta(kMarker, "1");
  for (const auto& [k, v] : meta) put_meta(k, v);
  for (const auto& [name, value] : g.values()) {
    const ir::Role role = g.tensor(name).role;
    if (role != ir::Role::kParam && role != ir::Role::kBuffer && role != ir::Role::kOptimizerState)
      continue;
    detail::tensor_to_proto(value, name, graph->add_initializer());
    put_meta(kRoleKey + name, role_tag(role));
  }
  write_model_file(m, path);
}

Checkpoint load_checkpoint(const std::string& path) {
  onnx::ModelProto m;
  const std::string bytes = detail::read_file(path);
  if (!m.ParseFromString(bytes)) throw ModelError(path + ": not an ONNX file (cannot parse)");
  Checkpoint c;
  for (const auto& p : m.metadata_props()) c.meta[p.key()] = p.value();
  if (!c.meta.count(kMarker))
    throw ModelError(path + ": an ONNX file but not a pipetrain checkpoint");
  for (const auto& init : m.graph().initializer()) {
    const std::string what = path + ": initializer '" + init.name() + "'";
    c.values[init.name()] = detail::tensor_from_proto(init, ".", what);
    auto it = c.meta.find(kRoleKey + init.name());
    const std::string tag = it == c.meta.end() ? "" : it->second;
    c.roles[init.name()] = tag == "param"    ? ir::Role::kParam
                           : tag == "buffer" ? ir::Role::kBuffer
                                             : ir::Role::kOptimizerState;
  }
  return c;
}

void restore_checkpoint(const Checkpoint& c, ir::Graph& g, const std::string& path) {
  for (const auto& [name, value] : g.values()) {
    const ir::Role role = g.tensor(name).role;
    if ((role == ir::Role::kParam || role == ir::Role::kBuffer) && !c.values.count(name))
      throw ModelError(path + ": has no value for '" + name + "' (a checkpoint of another model?)");
  }
  for (const auto& [name, value] : c.values) {
    const ir::Role role = c.roles.at(name);
    ir::Tensor* dst = g.mutable_value(name);
    if (role != ir::Role::kOptimizerState) {
      if (!dst) throw ModelError(path + ": '" + name + "' is not a value of the model");
      if (dst->shape() != value.shape() || dst->dtype() != value.dtype())
        throw ModelError(path + ": '" + name + "' is " + ir::dtype_name(value.dtype()) + " " +
                         ir::shape_str(value.shape()) + " but the model has " +
                         ir::dtype_name(dst->dtype()) + " " + ir::shape_str(dst->shape()));
      std::memcpy(dst->raw(), value.raw(), value.nbytes());  // in place: shared with the model
    } else {
      g.set_value(name, value, role);
    }
  }
}

}  // namespace pipetrain::importer
