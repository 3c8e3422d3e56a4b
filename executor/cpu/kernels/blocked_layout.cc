#include "executor/cpu/kernels/blocked_layout.h"

#include <cstdlib>
#include <set>
#include <string>

#include "executor/cpu/kernels/dnnl_util.h"

namespace pipetrain::exec::cpu {

namespace {

using dnnl::memory;

constexpr int64_t kNone = -1, kAllChannels = 0;

memory::desc desc_of(const ir::Shape& s, memory::format_tag tag) {
  return memory::desc(memory::dims(s.begin(), s.end()), memory::data_type::f32, tag);
}

// The layout oneDNN picks for a ResNet-style 3x3, 64-channel convolution's
// output when left free to choose (format `any`).
int64_t preferred_block() {
  try {
    const ir::Shape x = {8, 64, 28, 28}, w = {64, 64, 3, 3};
    auto any = [](const ir::Shape& s) { return desc_of(s, memory::format_tag::any); };
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, any(x), any(w), any(x),
                                      {1, 1}, {0, 0}, {1, 1}, {1, 1});
    memory::desc dst = dnnl::convolution_forward::primitive_desc(d, dnnl_util::engine()).dst_desc();
    if (dst == desc_of(x, memory::format_tag::nhwc)) return kAllChannels;
    if (dst == desc_of(x, memory::format_tag::nChw16c)) return 16;
    if (dst == desc_of(x, memory::format_tag::nChw8c)) return 8;
  } catch (const dnnl::error&) {
  }
  return kNone;
}

// PIPETRAIN_BLOCKED_LAYOUT=nhwc takes AVX-512's layout on any CPU (oneDNN
// computes in nhwc on AVX2 too, at some cost), so that its paths are tested
// on every machine; =off keeps every activation row-major (the kernels'
// plain paths, as a CPU without a blocked layout runs them).
int64_t process_block() {
  static const int64_t block = [] {
    const char* forced = std::getenv("PIPETRAIN_BLOCKED_LAYOUT");
    if (forced && std::string(forced) == "nhwc") return kAllChannels;
    if (forced && std::string(forced) == "off") return kNone;
    return preferred_block();
  }();
  return block;
}

bool is_4d_float(const ir::Graph& g, const std::string& t) {
  if (t.empty() || !g.has_tensor(t)) return false;
  const ir::TensorDesc& d = g.tensor(t);
  return d.dtype == ir::DType::kF32 && d.shape.size() == 4;
}

// Elementwise on a flat loop: every input is a scalar or has the output's
// shape, so no broadcast ever looks at which axis is which.
bool flat_elementwise(const ir::Graph& g, const ir::Node& n) {
  if (!n.has_output(0) || !is_4d_float(g, n.outputs[0])) return false;
  const ir::Shape& y = g.tensor(n.outputs[0]).shape;
  for (const auto& in : n.inputs) {
    if (in.empty()) continue;
    if (!g.has_tensor(in)) return false;
    const ir::Shape& s = g.tensor(in).shape;
    if (ir::numel(s) != 1 && s != y) return false;
  }
  return true;
}

// Element (n, c, h, w)'s offset in the blocked layout, as a function of the
// plain offset's parts: calls f(plain, blocked) for every element.
template <typename F>
void for_each_element(const ir::Shape& s, F f) {
  const int64_t c = s[1], hw = s[2] * s[3], b = channel_block(c);
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t plain = (n * c + ch) * hw;
      const int64_t blocked = (n * c + ch / b * b) * hw + ch % b;
      for (int64_t i = 0; i < hw; ++i) f(plain + i, blocked + i * b);
    }
}

}  // namespace

int64_t channel_block(int64_t channels) {
  const int64_t block = process_block();
  if (block == kNone || channels <= 0) return 0;
  if (block == kAllChannels) return channels;
  return channels % block == 0 ? block : 0;
}

bool blockable(const ir::TensorDesc& t) {
  return t.dtype == ir::DType::kF32 && t.shape.size() == 4 && channel_block(t.shape[1]) > 0;
}

LayoutAccess blocked_layout_access(const ir::Graph& g, const ir::Node& n) {
  static const std::set<std::string> kElementwise = {"Relu", "LeakyRelu",   "Clip",      "Sigmoid",
                                                     "Tanh", "HardSigmoid", "HardSwish", "Elu",
                                                     "Add",  "Sub",         "Mul",       "Div"};
  if (n.inputs.empty() || !is_4d_float(g, n.inputs[0])) return {};
  // A fused Conv's residual (input 3) too: oneDNN's sum post-op reads it in Y's layout.
  if (n.op_type == "Conv") return {LayoutRole::kConvLike, n.has_input(3) ? 9u : 1u, 1};
  if (n.op_type == "GlobalAveragePool") return {LayoutRole::kConvLike, 1, 1};
  if (n.op_type == "MaxPool" && !n.has_output(1)) return {LayoutRole::kSameLayout};
  // Our own kernels (norm.cc, grad_norm.cc), any block: X -> Y; (dY, X) -> dX.
  // A fused residual (input 5) in either layout (norm.cc's epilogue reads both).
  if (n.op_type == "BatchNormalization")
    return {LayoutRole::kConvLike, n.has_input(5) ? 33u : 1u, 1};
  if (n.op_type == "BatchNormalizationGrad" && is_4d_float(g, n.inputs[1]))
    return {LayoutRole::kConvLike, 3, 1};
  if (kElementwise.count(n.op_type) && flat_elementwise(g, n)) return {LayoutRole::kSameLayout};
  // The backward too. On AVX-512 the forward takes nhwc and oneDNN's backward
  // computes in nChw16c, so ConvGrad reorders its nhwc dY and X there, as it
  // would row-major ones; what the forward gains is the convolutions' X
  // (which ConvGrad reads) kept nhwc, not reordered from row-major each time.
  if (process_block() == kNone) return {};
  if (n.op_type == "ConvGrad" && is_4d_float(g, n.inputs[1]))
    return {LayoutRole::kConvLike, 3, 1};  // (dY, X) -> dX; dW and dB stay row-major
  if (n.op_type == "ReluGrad" && flat_elementwise(g, n)) return {LayoutRole::kSameLayout};
  // (dY, X) -> dX, all three in one layout.
  if (n.op_type == "MaxPoolGrad" && is_4d_float(g, n.inputs[1])) return {LayoutRole::kSameLayout};
  return {};
}

memory::desc blocked_desc(const ir::Shape& s) {
  const int64_t block = process_block();
  if (block == kAllChannels) return desc_of(s, memory::format_tag::nhwc);
  return desc_of(s, block == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c);
}

void to_blocked(const float* src, float* dst, const ir::Shape& s) {
  for_each_element(s, [&](int64_t plain, int64_t blocked) { dst[blocked] = src[plain]; });
}

void from_blocked(const float* src, float* dst, const ir::Shape& s) {
  for_each_element(s, [&](int64_t plain, int64_t blocked) { dst[plain] = src[blocked]; });
}

const float* row_major_data(const float* data, const ir::Shape& s, bool blocked,
                            std::vector<float>* copy) {
  if (!blocked) return data;
  copy->resize(static_cast<size_t>(ir::numel(s)));
  from_blocked(data, copy->data(), s);
  return copy->data();
}

}  // namespace pipetrain::exec::cpu
