#include "ir/op_registry.h"

#include "ir/error.h"

namespace pipetrain::ir {

const TensorDesc& InferContext::input(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required but absent");
  return graph_.tensor(node_.inputs[i]);
}

const Tensor* InferContext::constant(size_t i) const {
  if (!has_input(i)) return nullptr;
  return graph_.value(node_.inputs[i]);
}

std::vector<int64_t> InferContext::constant_ints(size_t i) const {
  const Tensor* t = constant(i);
  if (!t)
    fail("input " + std::to_string(i) + " ('" + (has_input(i) ? node_.inputs[i] : "") +
         "') must be a constant known at import time (static shapes only)");
  return t->to_i64();
}

void InferContext::set_output(size_t i, DType dtype, Shape shape) {
  if (outputs_.size() <= i) outputs_.resize(i + 1);
  outputs_[i] = {dtype, std::move(shape)};
}

void InferContext::fail(const std::string& msg) const {
  throw ModelError(node_.describe() + ": " + msg);
}

void InferContext::unsupported(const std::string& msg) const {
  throw UnsupportedOp(node_.describe() + ": " + msg);
}

OpRegistry::OpRegistry() {
#define PIPETRAIN_ADD_SCHEMA(op)         \
  {                                      \
    OpSchema s = schema_##op();          \
    s.op_type = #op;                     \
    schemas_.emplace(#op, std::move(s)); \
  }
  PIPETRAIN_OPS(PIPETRAIN_ADD_SCHEMA)
#undef PIPETRAIN_ADD_SCHEMA
}

const OpRegistry& OpRegistry::instance() {
  static const OpRegistry registry;
  return registry;
}

const OpSchema* OpRegistry::find(const std::string& op_type) const {
  auto it = schemas_.find(op_type);
  return it == schemas_.end() ? nullptr : &it->second;
}

std::vector<std::pair<DType, Shape>> infer_node(const Graph& g, const Node& n) {
  const OpSchema* s = OpRegistry::instance().find(n.op_type);
  if (!s) throw UnsupportedOp(n.describe() + ": op '" + n.op_type + "' is not supported");
  // Trailing absent optionals ("") do not count towards arity.
  int nin = static_cast<int>(n.inputs.size());
  while (nin > 0 && n.inputs[static_cast<size_t>(nin - 1)].empty()) --nin;
  if (nin < s->min_inputs || nin > s->max_inputs)
    throw ModelError(n.describe() + ": has " + std::to_string(nin) + " inputs, expected " +
                     std::to_string(s->min_inputs) + " to " + std::to_string(s->max_inputs));
  int nout = static_cast<int>(n.outputs.size());
  if (nout < s->min_outputs || nout > s->max_outputs)
    throw ModelError(n.describe() + ": has " + std::to_string(nout) + " outputs, expected " +
                     std::to_string(s->min_outputs) + " to " + std::to_string(s->max_outputs));
  for (const auto& [key, value] : n.attrs) {
    const AttrSpec* spec = nullptr;
    for (const auto& a : s->attrs)
      if (a.name == key) spec = &a;
    if (!spec) throw UnsupportedOp(n.describe() + ": attribute '" + key + "' is not supported");
    if (attr_type(value) != spec->type)
      throw ModelError(n.describe() + ": attribute '" + key + "' is " +
                       attr_type_name(attr_type(value)) + ", expected " +
                       attr_type_name(spec->type));
  }
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!n.inputs[i].empty() && !g.has_tensor(n.inputs[i]))
      throw ModelError(n.describe() + ": input '" + n.inputs[i] + "' is not defined");
  }
  InferContext ctx(g, n);
  s->infer(ctx);
  auto outs = ctx.outputs();
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (n.outputs[i].empty()) continue;
    if (i >= outs.size() || outs[i].first == DType::kUndefined)
      throw ModelError(n.describe() + ": shape rule gave no type for output " + std::to_string(i) +
                       " ('" + n.outputs[i] + "')");
  }
  return outs;
}

}  // namespace pipetrain::ir
