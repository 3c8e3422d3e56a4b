#include "models/onnx_builder.h"

#include <cassert>
#include <cctype>
#include <cmath>

namespace pipetrain::models {

onnx::AttributeProto attr_int(const std::string& name, int64_t v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}

onnx::AttributeProto attr_ints(const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}

onnx::AttributeProto attr_float(const std::string& name, float v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(v);
  return a;
}

onnx::AttributeProto attr_string(const std::string& name, const std::string& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(v);
  return a;
}

OnnxBuilder::OnnxBuilder(const std::string& graph_name, uint64_t seed, Values values)
    : rng_(seed), values_(values) {
  graph_.set_name(graph_name);
}

void OnnxBuilder::push_scope(const std::string& local) {
  assert(!local.empty());
  bool index = std::isdigit(static_cast<unsigned char>(local[0])) != 0;
  ScopeEntry e;
  e.local = local;
  e.shown = index && !scopes_.empty() ? scopes_.back().local + "." + local : local;
  e.dotted = scopes_.empty() ? local : scopes_.back().dotted + "." + local;
  scopes_.push_back(std::move(e));
}

std::string OnnxBuilder::add_value_info(onnx::ValueInfoProto* vi, const std::string& name,
                                        int32_t elem_type, const std::vector<int64_t>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    if (d == 0)
      shape->add_dim()->set_dim_param("N");
    else
      shape->add_dim()->set_dim_value(d);
  }
  return name;
}

void OnnxBuilder::output(const std::string& tensor, int32_t elem_type,
                         const std::vector<int64_t>& dims) {
  add_value_info(graph_.add_output(), tensor, elem_type, dims);
}

std::string OnnxBuilder::node_name(const std::string& op_type) {
  std::string prefix;
  for (const auto& s : scopes_) prefix += "/" + s.shown;
  std::string base = prefix + "/" + op_type;
  int uses = name_uses_[base]++;
  return uses == 0 ? base : base + "_" + std::to_string(uses);
}

// Uniform draws take the top 24 bits of a 64-bit draw (exact in float);
// normal draws use Box-Muller on two 53-bit uniforms. Both are written out
// rather than taken from <random>'s distributions, whose algorithms differ
// between standard libraries: the same seed gives the same weights anywhere.
void OnnxBuilder::fill(float* dst, int64_t n, Init init) {
  if (init.kind == Init::Kind::kConstant) {
    for (int64_t i = 0; i < n; ++i) dst[i] = init.a;
    return;
  }
  if (values_ == Values::kZeros) return;  // the caller's buffer is zero-filled
  if (init.kind == Init::Kind::kUniform) {
    constexpr float kInv24 = 1.0f / 16777216.0f;
    for (int64_t i = 0; i < n; ++i) {
      float u = static_cast<float>(rng_() >> 40) * kInv24;  // [0, 1)
      dst[i] = (2.0f * u - 1.0f) * init.a;
    }
    return;
  }
  constexpr double kInv53 = 1.0 / 9007199254740992.0;
  constexpr double kTwoPi = 6.283185307179586;
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = (static_cast<double>(rng_() >> 11) + 1.0) * kInv53;  // (0, 1]
    double u2 = static_cast<double>(rng_() >> 11) * kInv53;
    double r = std::sqrt(-2.0 * std::log(u1)) * init.a;
    dst[i] = static_cast<float>(r * std::cos(kTwoPi * u2));
    if (i + 1 < n) dst[i + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
  }
}

std::string OnnxBuilder::initializer(const std::string& local, const std::vector<int64_t>& shape,
                                     Init init) {
  std::string name = scopes_.empty() ? local : scopes_.back().dotted + "." + local;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  auto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t->add_dims(d);
  if (values_ == Values::kNone) return name;
  std::string* raw = t->mutable_raw_data();
  raw->resize(static_cast<size_t>(n) * sizeof(float));
  // raw_data is little-endian float32, which is the host layout on every
  // platform pipetrain builds for.
  fill(reinterpret_cast<float*>(raw->data()), n, init);
  return name;
}

std::string OnnxBuilder::param(const std::string& local, const std::vector<int64_t>& shape,
                               Init init) {
  std::string name = initializer(local, shape, init);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  param_count_ += n;
  return name;
}

std::string OnnxBuilder::buffer(const std::string& local, const std::vector<int64_t>& shape,
                                Init init) {
  return initializer(local, shape, init);
}

std::string OnnxBuilder::constant_i64(const std::vector<int64_t>& values,
                                      const std::vector<int64_t>& shape) {
  onnx::AttributeProto a;
  a.set_name("value");
  a.set_type(onnx::AttributeProto::TENSOR);
  auto* t = a.mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : shape) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
  return op("Constant", {}, {a});
}

std::string OnnxBuilder::constant_f32(const std::vector<float>& values,
                                      const std::vector<int64_t>& shape) {
  onnx::AttributeProto a;
  a.set_name("value");
  a.set_type(onnx::AttributeProto::TENSOR);
  auto* t = a.mutable_t();
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t->add_dims(d);
  t->mutable_raw_data()->assign(reinterpret_cast<const char*>(values.data()),
                                values.size() * sizeof(float));
  return op("Constant", {}, {a});
}

std::vector<std::string> OnnxBuilder::ops(const std::string& op_type,
                                          const std::vector<std::string>& inputs, int num_outputs,
                                          const std::vector<onnx::AttributeProto>& attrs,
                                          const std::string& out_name) {
  auto* n = graph_.add_node();
  n->set_name(node_name(op_type));
  n->set_op_type(op_type);
  for (const auto& in : inputs) n->add_input(in);
  std::vector<std::string> outs;
  for (int k = 0; k < num_outputs; ++k) {
    outs.push_back(k == 0 && !out_name.empty() ? out_name
                                               : n->name() + "_output_" + std::to_string(k));
    n->add_output(outs.back());
  }
  for (const auto& a : attrs) *n->add_attribute() = a;
  return outs;
}

onnx::ModelProto OnnxBuilder::finish() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("pipetrain zoo");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  m.mutable_graph()->Swap(&graph_);
  return m;
}

}  // namespace pipetrain::models
