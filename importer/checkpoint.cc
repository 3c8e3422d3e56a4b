#include "importer/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include <fmt/core.h>

#include <onnx/onnx_pb.h>

#include "importer/internal.h"
#include "importer/model_file.h"
#include "ir/error.h"

namespace pipetrain::importer {

namespace {

constexpr const char* kRoleKey = "pipetrain.role.";  // metadata per value: its role
constexpr const char* kMarker = "pipetrain.checkpoint";
constexpr const char* kChecksumKey = "pipetrain.crc32";

const char* role_tag(ir::Role r) {
  switch (r) {
    case ir::Role::kParam: return "param";
    case ir::Role::kBuffer: return "buffer";
    default: return "optimizer_state";
  }
}

// CRC-32 over what a checkpoint means: each value's name, role, dtype, shape
// and bytes, and the run's metadata, in name order.
std::string checksum_hex(const Checkpoint& c) {
  uLong crc = crc32(0L, Z_NULL, 0);
  auto add = [&](const void* p, size_t n) {
    const auto* b = static_cast<const Bytef*>(p);
    while (n > 0) {  // crc32 takes uInt lengths
      const uInt chunk = static_cast<uInt>(std::min<size_t>(n, size_t{1} << 30));
      crc = crc32(crc, b, chunk);
      b += chunk;
      n -= chunk;
    }
  };
  auto add_str = [&](const std::string& s) { add(s.data(), s.size() + 1); };
  for (const auto& [k, v] : c.meta) {
    if (k == kMarker || k == kChecksumKey || k.rfind(kRoleKey, 0) == 0) continue;
    add_str(k);
    add_str(v);
  }
  for (const auto& [name, value] : c.values) {
    add_str(name);
    add_str(role_tag(c.roles.at(name)));
    add_str(ir::dtype_name(value.dtype()) + ir::shape_str(value.shape()));
    add(value.raw(), value.nbytes());
  }
  return fmt::format("{:08x}", static_cast<uint32_t>(crc));
}

}  // namespace

Checkpoint checkpoint_of(const ir::Graph& g, const std::map<std::string, std::string>& meta,
                         bool copy) {
  Checkpoint c;
  c.meta = meta;
  for (const auto& [name, value] : g.values()) {
    const ir::Role role = g.tensor(name).role;
    if (role != ir::Role::kParam && role != ir::Role::kBuffer && role != ir::Role::kOptimizerState)
      continue;
    c.values[name] = copy ? value.clone() : value;
    c.roles[name] = role;
  }
  return c;
}

void write_checkpoint(const Checkpoint& c, const std::string& path) {
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
  for (const auto& [k, v] : c.meta)
    if (k != kMarker && k != kChecksumKey && k.rfind(kRoleKey, 0) != 0) put_meta(k, v);
  for (const auto& [name, value] : c.values) {
    detail::tensor_to_proto(value, name, graph->add_initializer());
    put_meta(kRoleKey + name, role_tag(c.roles.at(name)));
  }
  put_meta(kChecksumKey, checksum_hex(c));
  write_model_file(m, path);
}

Checkpoint load_checkpoint(const std::string& path) {
  onnx::ModelProto m;
  const std::string bytes = detail::read_file(path);
  if (!m.ParseFromString(bytes))
    throw ModelError(path + ": not an ONNX file (cannot parse; truncated?)");
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
  if (auto it = c.meta.find(kChecksumKey); it != c.meta.end()) {
    const std::string stored = it->second;
    if (const std::string now = checksum_hex(c); now != stored)
      throw ModelError(path + ": checksum mismatch (written " + stored + ", reads " + now +
                       "): the file changed after it was written");
  }
  // What remains is the run's metadata, as it was given.
  for (auto it = c.meta.begin(); it != c.meta.end();)
    it = it->first == kMarker || it->first == kChecksumKey || it->first.rfind(kRoleKey, 0) == 0
             ? c.meta.erase(it)
             : std::next(it);
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
