// ModelProto -> ir::Graph: node names, the supported-op check, graph inputs
// with bound shapes, initializers and Constant nodes as values, attributes.
#include <algorithm>
#include <map>

#include "importer/internal.h"
#include "importer/op_expansions.h"
#include "ir/error.h"
#include "ir/op_registry.h"

namespace pipetrain::importer::detail {

namespace {

bool is_default_domain(const std::string& d) {
  return d.empty() || d == "ai.onnx";
}

std::string quoted_list(const std::vector<std::string>& names, size_t limit) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < limit; ++i) s += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > limit) s += " and " + std::to_string(names.size() - limit) + " more";
  return s;
}

std::string dim_label(const onnx::TensorShapeProto_Dimension& d) {
  return d.has_dim_param() && !d.dim_param().empty() ? "'" + d.dim_param() + "'" : "?";
}

// The static shape of graph input `vi`: dim_values as given, a symbolic or
// missing leading dimension bound by options.batch, explicit input_shapes winning.
ir::Shape input_shape(const onnx::ValueInfoProto& vi, ir::DType dtype,
                      const ImportOptions& options) {
  const std::string& name = vi.name();
  const std::string what = "input '" + name + "'";
  const auto& tt = vi.type().tensor_type();
  auto given = options.input_shapes.find(name);
  if (!tt.has_shape()) {
    if (given == options.input_shapes.end())
      throw ModelError(what + " has no shape in the model: pass --input-shape " + name +
                       "=d0,d1,...");
    return checked_shape(given->second, dtype, what);
  }
  const auto& dims = tt.shape().dim();
  if (given != options.input_shapes.end()) {
    const ir::Shape& s = given->second;
    if (static_cast<int>(s.size()) != dims.size())
      throw ModelError(what + " has rank " + std::to_string(dims.size()) +
                       " in the model, but the given shape " + ir::shape_str(s) + " has rank " +
                       std::to_string(s.size()));
    for (int i = 0; i < dims.size(); ++i)
      if (dims[i].has_dim_value() && dims[i].dim_value() >= 0 && dims[i].dim_value() != s[i])
        throw ModelError(what + " has dimension " + std::to_string(dims[i].dim_value()) +
                         " at axis " + std::to_string(i) + " in the model, but the given shape " +
                         ir::shape_str(s) + " says " + std::to_string(s[i]));
    return checked_shape(s, dtype, what);
  }
  ir::Shape s;
  for (int i = 0; i < dims.size(); ++i) {
    const auto& d = dims[i];
    if (d.has_dim_value() && d.dim_value() >= 0) {
      s.push_back(d.dim_value());
    } else if (i == 0 && options.batch) {
      s.push_back(*options.batch);
    } else {
      throw ModelError(
          what + " has dynamic dimension " + dim_label(d) + " at axis " + std::to_string(i) +
          ": pass " + (i == 0 ? std::string("--batch N") : "--input-shape " + name + "=d0,d1,..."));
    }
  }
  return checked_shape(s, dtype, what);
}

// A value given for graph input `vi` (ImportOptions::input_values), checked
// against the declared dtype and static dimensions.
ir::Tensor bound_value(const onnx::ValueInfoProto& vi, ir::DType dtype, const ir::Tensor& value) {
  const std::string what = "the value given for input '" + vi.name() + "'";
  if (value.dtype() != dtype)
    throw ModelError(what + " is " + ir::dtype_name(value.dtype()) + ", the model declares " +
                     ir::dtype_name(dtype));
  const auto& tt = vi.type().tensor_type();
  if (tt.has_shape()) {
    const auto& dims = tt.shape().dim();
    bool ok = dims.size() == static_cast<int>(value.shape().size());
    for (int i = 0; ok && i < dims.size(); ++i)
      ok = !dims[i].has_dim_value() || dims[i].dim_value() < 0 ||
           dims[i].dim_value() == value.shape()[static_cast<size_t>(i)];
    if (!ok)
      throw ModelError(what + " has shape " + ir::shape_str(value.shape()) +
                       ", which does not match the model's declaration");
  }
  return value;
}

}  // namespace

// A control-flow body travels in the IR node as its serialized GraphProto
// (control_flow.cc inlines it at import), with external tensors inlined,
// since the model's directory is not known there.
std::string serialized_subgraph(const onnx::GraphProto& body, const std::string& base_dir,
                                const std::string& what) {
  onnx::GraphProto copy = body;
  for (auto& init : *copy.mutable_initializer())
    if (init.data_location() == onnx::TensorProto::EXTERNAL)
      inline_external_data(&init, base_dir, what + ": initializer '" + init.name() + "'");
  std::string bytes;
  copy.SerializeToString(&bytes);
  return bytes;
}

void outer_references(const onnx::GraphProto& body, std::set<std::string>* defined,
                      std::vector<std::string>* refs) {
  for (const auto& in : body.input()) defined->insert(in.name());
  for (const auto& init : body.initializer()) defined->insert(init.name());
  for (const auto& n : body.node())
    for (const auto& o : n.output()) defined->insert(o);
  for (const auto& n : body.node()) {
    for (const auto& in : n.input())
      if (!in.empty() && !defined->count(in) &&
          std::find(refs->begin(), refs->end(), in) == refs->end())
        refs->push_back(in);
    for (const auto& a : n.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH) outer_references(a.g(), defined, refs);
    }
  }
  for (const auto& o : body.output())
    if (!defined->count(o.name()) && std::find(refs->begin(), refs->end(), o.name()) == refs->end())
      refs->push_back(o.name());
}

std::vector<std::string> outer_references(const onnx::NodeProto& n) {
  std::vector<std::string> refs;
  for (const auto& a : n.attribute()) {
    if (a.type() != onnx::AttributeProto::GRAPH) continue;
    std::set<std::string> defined;
    outer_references(a.g(), &defined, &refs);
  }
  return refs;
}

namespace {

ir::Attribute convert_attribute(const onnx::AttributeProto& a, const std::string& node_desc,
                                const std::string& base_dir) {
  using A = onnx::AttributeProto;
  const std::string what = node_desc + ": attribute '" + a.name() + "'";
  auto type = a.type();
  if (type == A::UNDEFINED) {  // very old exporters: the set field decides
    if (a.has_f())
      type = A::FLOAT;
    else if (a.has_i())
      type = A::INT;
    else if (a.has_s())
      type = A::STRING;
    else if (a.has_t())
      type = A::TENSOR;
    else if (a.floats_size())
      type = A::FLOATS;
    else if (a.ints_size())
      type = A::INTS;
    else if (a.strings_size())
      type = A::STRINGS;
  }
  switch (type) {
    case A::FLOAT: return a.f();
    case A::INT: return static_cast<int64_t>(a.i());
    case A::STRING: return a.s();
    case A::FLOATS: return std::vector<float>(a.floats().begin(), a.floats().end());
    case A::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case A::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case A::TENSOR: return tensor_from_proto(a.t(), base_dir, what);
    case A::GRAPH: return serialized_subgraph(a.g(), base_dir, what);
    default: break;
  }
  std::string kind = A::AttributeType_IsValid(type) ? A::AttributeType_Name(type) : "unknown";
  throw UnsupportedOp(what + " has kind " + kind + ", which pipetrain does not support");
}

// The value of a Constant node (value, value_float(s), value_int(s)).
ir::Tensor constant_value(const onnx::NodeProto& n, const std::string& node_desc,
                          const std::string& base_dir) {
  if (n.attribute_size() != 1)
    throw ModelError(node_desc + ": needs exactly one value attribute, has " +
                     std::to_string(n.attribute_size()));
  const auto& a = n.attribute(0);
  const std::string& key = a.name();
  ir::Attribute v = convert_attribute(a, node_desc, base_dir);
  auto type = ir::attr_type(v);
  if (key == "value" && type == ir::AttrType::kTensor) return std::get<ir::Tensor>(v);
  if (key == "value_float" && type == ir::AttrType::kFloat)
    return ir::Tensor::scalar_f32(std::get<float>(v));
  if (key == "value_int" && type == ir::AttrType::kInt)
    return ir::Tensor::from_i64({std::get<int64_t>(v)}, {});
  if (key == "value_floats" && type == ir::AttrType::kFloats) {
    const auto& f = std::get<std::vector<float>>(v);
    return ir::Tensor::from_f32(f, {static_cast<int64_t>(f.size())});
  }
  if (key == "value_ints" && type == ir::AttrType::kInts) {
    const auto& i = std::get<std::vector<int64_t>>(v);
    return ir::Tensor::from_i64(i, {static_cast<int64_t>(i.size())});
  }
  throw UnsupportedOp(node_desc + ": constant attribute '" + key + "' of kind " +
                      ir::attr_type_name(type) + " is not supported");
}

}  // namespace

std::string ir_op_type(const onnx::NodeProto& n) {
  return n.domain() == kPreviewTrainingDomain ? n.domain() + "." + n.op_type() : n.op_type();
}

void fill_node(const onnx::NodeProto& np, const std::string& base_dir, ir::Node* n) {
  const std::string desc = n->describe();
  n->inputs.assign(np.input().begin(), np.input().end());
  n->outputs.assign(np.output().begin(), np.output().end());
  for (const auto& a : np.attribute()) {
    if (a.name().empty()) throw ModelError(desc + ": has an attribute without a name");
    if (!a.ref_attr_name().empty())
      throw UnsupportedOp(desc + ": attribute '" + a.name() + "' refers to a function attribute");
    if (!n->attrs.emplace(a.name(), convert_attribute(a, desc, base_dir)).second)
      throw ModelError(desc + ": attribute '" + a.name() + "' is given twice");
  }
  // What a body reads from outside becomes an input after the node's own,
  // so that topological order runs its producers first.
  for (const auto& ref : outer_references(np)) n->inputs.push_back(ref);
}

ir::Tensor constant_node_value(const onnx::NodeProto& n, const std::string& node_desc,
                               const std::string& base_dir) {
  return constant_value(n, node_desc, base_dir);
}

int64_t default_opset(const onnx::ModelProto& model) {
  int64_t opset = -1;
  for (const auto& o : model.opset_import())
    if (is_default_domain(o.domain())) opset = std::max(opset, static_cast<int64_t>(o.version()));
  if (opset >= 0) return opset;
  // A graph of preview training ops alone (ONNX's optimizer tests): the ops
  // they expand into read the same in every opset; 17 is as good as any.
  bool preview_only = model.graph().node_size() > 0;
  for (const auto& n : model.graph().node()) preview_only &= n.domain() == kPreviewTrainingDomain;
  if (preview_only) return 17;
  throw ModelError("the model imports no default-domain (ai.onnx) opset");
}

std::vector<std::string> node_names(const onnx::GraphProto& graph) {
  std::set<std::string> taken;
  for (const auto& n : graph.node())
    if (!n.name().empty()) taken.insert(n.name());
  std::set<std::string> used;
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(graph.node_size()));
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto& n = graph.node(i);
    std::string name;
    if (!n.name().empty() && !used.count(n.name())) {
      name = n.name();
    } else {
      std::string base =
          n.name().empty() ? (n.op_type().empty() ? "node" : n.op_type()) + "_" + std::to_string(i)
                           : n.name();
      name = base;
      for (int k = 1; taken.count(name) || used.count(name); ++k)
        name = base + "_" + std::to_string(k);
    }
    used.insert(name);
    taken.insert(name);
    names.push_back(name);
  }
  return names;
}

void check_ops_supported(const onnx::GraphProto& graph, const std::vector<std::string>& names) {
  const auto& registry = ir::OpRegistry::instance();
  std::map<std::string, std::vector<std::string>> missing;  // op -> node names
  size_t count = 0;
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto& n = graph.node(i);
    const ir::OpSchema* schema = registry.find(n.op_type());
    bool known = (is_default_domain(n.domain()) && ((schema != nullptr && !schema->internal) ||
                                                    expanded_ops().count(n.op_type()))) ||
                 (n.domain() == kPreviewTrainingDomain && expanded_ops().count(ir_op_type(n)));
    if (known) continue;
    std::string op = is_default_domain(n.domain()) ? n.op_type() : n.domain() + "::" + n.op_type();
    missing[op].push_back(names[static_cast<size_t>(i)]);
    ++count;
  }
  if (missing.empty()) return;
  std::string msg = std::to_string(count) + (count == 1 ? " node uses" : " nodes use") +
                    " ops pipetrain does not support:";
  bool first = true;
  for (const auto& [op, nodes] : missing) {
    msg += std::string(first ? " " : "; ") + op + " (" + quoted_list(nodes, 20) + ")";
    first = false;
  }
  throw UnsupportedOp(msg);
}

void check_structure(const onnx::GraphProto& graph, const std::vector<std::string>& names) {
  std::set<std::string> defined;
  for (const auto& init : graph.initializer()) defined.insert(init.name());
  for (const auto& in : graph.input()) defined.insert(in.name());
  auto describe = [&](int i) {
    return graph.node(i).op_type() + " node '" + names[static_cast<size_t>(i)] + "'";
  };
  for (int i = 0; i < graph.node_size(); ++i)
    for (const auto& o : graph.node(i).output())
      if (!o.empty() && !defined.insert(o).second)
        throw ModelError(describe(i) + ": output '" + o +
                         "' is already defined elsewhere in the graph");
  for (int i = 0; i < graph.node_size(); ++i)
    for (const auto& in : graph.node(i).input())
      if (!in.empty() && !defined.count(in))
        throw ModelError(describe(i) + ": input '" + in +
                         "' is neither a graph input, an initializer nor produced by a node");
  for (const auto& o : graph.output())
    if (!defined.count(o.name()))
      throw ModelError("graph output '" + o.name() + "' is not produced by any node");
}

// The file's element type of every tensor the graph declares or holds.
std::map<std::string, int32_t> file_types(const onnx::GraphProto& gp) {
  std::map<std::string, int32_t> types;
  for (const auto* list : {&gp.input(), &gp.output(), &gp.value_info()})
    for (const auto& vi : *list)
      if (vi.type().has_tensor_type()) types[vi.name()] = vi.type().tensor_type().elem_type();
  for (const auto& init : gp.initializer()) types[init.name()] = init.data_type();
  for (const auto& n : gp.node())
    if (n.op_type() == "Constant" && n.output_size() == 1)
      for (const auto& a : n.attribute())
        if (a.name() == "value" && a.has_t()) types[n.output(0)] = a.t().data_type();
  return types;
}

ir::Graph graph_from_model(const onnx::ModelProto& model, int64_t opset,
                           const std::string& base_dir, const ImportOptions& options) {
  if (!model.has_graph()) throw ModelError("the model has no graph");
  const onnx::GraphProto& gp = model.graph();
  ir::Graph g;
  g.name = gp.name();
  g.opset = opset;
  g.source_opset = opset;
  auto names = node_names(gp);
  if (options.batch && *options.batch <= 0)
    throw ModelError("batch size must be positive, got " + std::to_string(*options.batch));

  // Which tensors are read at all, and which feed BatchNormalization's
  // running statistics (inputs 3 and 4: buffers, not trainable).
  std::set<std::string> read, bn_stats;
  for (const auto& n : gp.node()) {
    for (const auto& in : n.input()) read.insert(in);
    for (const auto& in : outer_references(n)) read.insert(in);
    if (n.op_type() == "BatchNormalization" && is_default_domain(n.domain()))
      for (int k = 3; k < 5 && k < n.input_size(); ++k) bn_stats.insert(n.input(k));
  }
  for (const auto& o : gp.output()) read.insert(o.name());

  std::set<std::string> initializer_names;
  for (const auto& init : gp.initializer()) {
    const std::string what = "initializer '" + init.name() + "'";
    if (init.name().empty()) throw ModelError("an initializer has no name");
    if (!initializer_names.insert(init.name()).second) throw ModelError(what + " is defined twice");
    if (!read.count(init.name())) continue;  // unused weights are dropped
    ir::Tensor t = tensor_from_proto(init, base_dir, what);
    ir::Role role = !ir::is_float(t.dtype())      ? ir::Role::kConstant
                    : bn_stats.count(init.name()) ? ir::Role::kBuffer
                                                  : ir::Role::kParam;
    g.set_value(init.name(), std::move(t), role);
  }
  for (const auto& s : gp.sparse_initializer())
    if (read.count(s.values().name()))
      throw UnsupportedOp("sparse initializer '" + s.values().name() + "' is not supported");

  std::set<std::string> input_names;
  for (const auto& vi : gp.input()) {
    const std::string& name = vi.name();
    if (initializer_names.count(name)) continue;  // old exporters list weights as inputs
    const std::string what = "input '" + name + "'";
    if (name.empty()) throw ModelError("a graph input has no name");
    if (!input_names.insert(name).second) throw ModelError(what + " is listed twice");
    if (!vi.type().has_tensor_type())
      throw UnsupportedOp(what +
                          " is not a tensor (sequences, maps and optionals are not supported)");
    ir::DType dtype = checked_dtype(vi.type().tensor_type().elem_type(), what);
    auto fixed = options.input_values.find(name);
    if (fixed != options.input_values.end()) {
      g.set_value(name, bound_value(vi, dtype, fixed->second), ir::Role::kConstant);
      continue;
    }
    g.set_tensor({name, dtype, input_shape(vi, dtype, options), ir::Role::kInput});
    g.inputs.push_back(name);
  }
  for (const auto& [name, shape] : options.input_shapes)
    if (!input_names.count(name))
      throw ModelError("--input-shape names '" + name + "', which is not a graph input");
  for (const auto& [name, value] : options.input_values)
    if (!input_names.count(name))
      throw ModelError("a value is given for '" + name + "', which is not a graph input");

  const std::map<std::string, int32_t> types = file_types(gp);
  std::set<std::string> produced;
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    ir::Node n;
    n.name = names[static_cast<size_t>(i)];
    n.op_type = ir_op_type(np);
    const std::string desc = n.describe();
    for (const auto& o : np.output()) {
      if (o.empty()) continue;
      if (!produced.insert(o).second || g.has_tensor(o))
        throw ModelError(desc + ": output '" + o + "' is already defined elsewhere in the graph");
    }
    if (np.op_type() == "Constant") {
      if (np.output_size() != 1 || np.output(0).empty())
        throw ModelError(desc + ": needs exactly one output");
      g.set_value(np.output(0), constant_value(np, desc, base_dir), ir::Role::kConstant);
      continue;
    }
    fill_node(np, base_dir, &n);
    // Gradient reads its y by name: as an input it is ordered after y's producers.
    if (n.op_type == std::string(kPreviewTrainingDomain) + ".Gradient" && n.has_attr("y"))
      n.inputs.push_back(n.attr_string("y", ""));
    if (narrow_int_expansions().count(n.op_type))  // they need to tell uint8 from int8
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (auto t = types.find(n.inputs[k]); t != types.end() && narrow_int_bytes(t->second))
          n.attrs[kFileDtypeAttr + std::to_string(k)] = ir::Attribute(int64_t{t->second});
    g.nodes.push_back(std::move(n));
  }

  for (const auto& o : gp.output()) {
    if (o.name().empty()) throw ModelError("a graph output has no name");
    g.outputs.push_back(o.name());
  }
  return g;
}

}  // namespace pipetrain::importer::detail
