// oneDNN convolution / deconvolution with memory format `any`: oneDNN picks
// blocked layouts (nChw8c on AVX2) and we reorder the plain tensors in and
// out, except for activations the runner keeps blocked (blocked_layout.h:
// the layout these kernels compute in). Primitives and reorders are cached
// per shapes + attributes + layouts; the scratchpad is ours (user mode) so
// one primitive may run on several threads.
#include <cassert>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/cpu/kernels/conv_impl.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/cpu/kernels/dnnl_util.h"
#include "executor/cpu/kernels/kernel_paths.h"

namespace pipetrain::exec::cpu {

namespace {

using dnnl::memory;
namespace du = dnnl_util;

struct ConvPrimitive {
  dnnl::primitive prim;
  memory::desc user_src, user_w, user_dst, user_b, user_sum;
  memory::desc src, w, dst, scratch;
  // Set when layouts differ; sum_in writes the residual where the sum post-op reads it.
  std::optional<dnnl::reorder> src_in, w_in, dst_out, sum_in;
  du::WeightCache weights;
};

int64_t product(const ir::Shape& s, size_t from) {
  int64_t p = 1;
  for (size_t i = from; i < s.size(); ++i) p *= s[i];
  return p;
}

memory::desc user_weights(const ConvArgs& a) {
  ir::Shape dims, strides;
  dnnl_weights_view(a, &dims, &strides);
  return du::plain_desc(dims, strides);
}

std::shared_ptr<ConvPrimitive> make_primitive(const ConvArgs& a) {
  DnnlWindow win;
  if (!dnnl_window(a, &win)) return nullptr;
  const memory::dims &strides = win.strides, &dilates = win.dilates, &pad_l = win.pad_l,
                     &pad_r = win.pad_r;
  auto p = std::make_shared<ConvPrimitive>();
  p->user_src = a.x_blocked ? blocked_desc(a.x) : du::plain_desc(a.x);
  p->user_dst = a.y_blocked ? blocked_desc(a.y) : du::plain_desc(a.y);
  p->user_w = user_weights(a);
  if (a.b_data) p->user_b = du::plain_desc({a.y[1]});
  auto any = [&](const memory::desc& d) { return du::any_layout(d, a.bf16); };
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // Applied to each block of the output before it is stored. The residual
  // as a sum post-op (dst += conv, dst holding the residual before the
  // primitive runs): oneDNN 2.6's binary add of a full tensor left its
  // brgemm kernels for slower ones (8.4 against 7.5 ms at 256 x 14 x 14).
  dnnl::post_ops ops;
  if (a.sum_data) {
    p->user_sum = a.sum_blocked ? blocked_desc(a.y) : du::plain_desc(a.y);
    ops.append_sum(1.0f);
  }
  if (a.relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  attr.set_post_ops(ops);
  auto& eng = du::engine();
  auto finish = [&](const auto& pd) {
    p->src = pd.src_desc();
    p->w = pd.weights_desc();
    p->dst = pd.dst_desc();
    p->scratch = pd.scratchpad_desc();
    if (p->src != p->user_src)
      p->src_in = dnnl::reorder(memory(p->user_src, eng), memory(p->src, eng));
    if (p->w != p->user_w) p->w_in = dnnl::reorder(memory(p->user_w, eng), memory(p->w, eng));
    if (p->dst != p->user_dst)
      p->dst_out = dnnl::reorder(memory(p->dst, eng), memory(p->user_dst, eng));
    if (a.sum_data && p->user_sum != p->dst)
      p->sum_in = dnnl::reorder(memory(p->user_sum, eng), memory(p->dst, eng));
  };
  try {
    auto kind = dnnl::prop_kind::forward_inference;
    // Convolution and deconvolution share one descriptor shape in oneDNN 2.x.
    auto build = [&](auto op_tag, dnnl::algorithm alg) {
      using Op = decltype(op_tag);
      auto d = a.b_data ? typename Op::desc(kind, alg, any(p->user_src), any(p->user_w), p->user_b,
                                            any(p->user_dst), strides, dilates, pad_l, pad_r)
                        : typename Op::desc(kind, alg, any(p->user_src), any(p->user_w),
                                            any(p->user_dst), strides, dilates, pad_l, pad_r);
      typename Op::primitive_desc pd(d, attr, eng);
      finish(pd);
      p->prim = Op(pd);
    };
    if (!a.transposed)
      build(dnnl::convolution_forward(), dnnl::algorithm::convolution_direct);
    else
      build(dnnl::deconvolution_forward(), dnnl::algorithm::deconvolution_direct);
  } catch (const dnnl::error&) {
    return nullptr;  // not expressible in oneDNN: the plain path runs instead
  }
  return p;
}

}  // namespace

bool dnnl_window(const ConvArgs& a, DnnlWindow* w) {
  const ir::WindowGeometry& g = a.geo;
  *w = DnnlWindow();
  for (size_t i = 0; i < g.rank(); ++i) {
    w->strides.push_back(g.strides[i]);
    w->dilates.push_back(g.dilations[i] - 1);  // oneDNN counts the gaps
    w->pad_l.push_back(g.pads_begin[i]);
    // ConvTranspose's output_padding extends the end: o = s (i - 1) + ext - pl - pr.
    // oneDNN takes a negative end padding (a larger output) but not a negative begin.
    w->pad_r.push_back(g.pads_end[i] - g.output_padding[i]);
    if (w->pad_l.back() < 0) return false;
  }
  return true;
}

// Conv W (M, C/G, k...) is (G, OC/G, IC/G, k...) row-major; ConvTranspose
// W (C, M/G, k...) is (G, IC/G, OC/G, k...), so OC and IC strides swap.
void dnnl_weights_view(const ConvArgs& a, ir::Shape* dims, ir::Shape* strides) {
  const ir::Shape& w = a.w;
  int64_t k = product(w, 2);
  ir::Shape spatial(w.begin() + 2, w.end());
  ir::Shape spatial_strides = ir::strides_of(spatial);
  int64_t g = a.group;
  int64_t oc_g = a.transposed ? w[1] : w[0] / g;  // output channels per group
  int64_t ic_g = a.transposed ? w[0] / g : w[1];  // input channels per group
  int64_t oc_stride = a.transposed ? k : ic_g * k;
  int64_t ic_stride = a.transposed ? oc_g * k : k;
  if (g > 1) {
    *dims = {g, oc_g, ic_g};
    *strides = {oc_g * ic_g * k, oc_stride, ic_stride};
  } else {
    *dims = {oc_g, ic_g};
    *strides = {oc_stride, ic_stride};
  }
  dims->insert(dims->end(), spatial.begin(), spatial.end());
  strides->insert(strides->end(), spatial_strides.begin(), spatial_strides.end());
}

std::string conv_cache_key(const ConvArgs& a) {
  const ir::WindowGeometry& g = a.geo;
  return std::string(a.transposed ? "deconv" : "conv") + " x" + du::key_of(a.x) + " w" +
         du::key_of(a.w) + " y" + du::key_of(a.y) + " g" + std::to_string(a.group) + " s" +
         du::key_of(g.strides) + " d" + du::key_of(g.dilations) + " pb" + du::key_of(g.pads_begin) +
         " pe" + du::key_of(g.pads_end) + " op" + du::key_of(g.output_padding) +
         (a.b_data ? " bias" : "") + (a.x_blocked ? " x:blocked" : "") +
         (a.y_blocked ? " y:blocked" : "") + (a.relu ? " relu" : "") +
         (a.sum_data ? (a.sum_blocked ? " sum:blocked" : " sum") : "") + (a.bf16 ? " bf16" : "") +
         " threads " + std::to_string(dnnl_threads());
}

bool conv_dnnl(const ConvArgs& a) {
  if (path_avoided(KernelPath::kDnnlConv)) return false;  // the kernel check found it wrong here
  auto p = du::cached_as<ConvPrimitive>(conv_cache_key(a), [&] { return make_primitive(a); });
  if (!p) return false;
  auto& eng = du::engine();
  auto& s = du::stream();
  // oneDNN's memory API takes non-const handles; inputs are only read.
  memory user_src(p->user_src, eng, const_cast<float*>(a.x_data));
  memory user_w(p->user_w, eng, const_cast<float*>(a.w_data));
  memory user_dst(p->user_dst, eng, a.y_data);
  memory src = user_src, w = user_w, dst = user_dst;
  if (p->src_in) {
    src = memory(p->src, eng);
    p->src_in->execute(s, user_src, src);
  }
  if (p->w_in)
    w = p->weights.get(*p->w_in, p->user_w, p->w, a.w_data, a.w_is_value, a.values_version);
  if (p->dst_out) dst = memory(p->dst, eng);
  if (p->sum_in) {
    memory user_sum(p->user_sum, eng, const_cast<float*>(a.sum_data));
    p->sum_in->execute(s, user_sum, dst);
  } else if (a.sum_data && a.sum_data != dst.get_data_handle()) {
    std::memcpy(dst.get_data_handle(), a.sum_data, p->dst.get_size());  // the same layout
  }
  memory scratch = du::scratchpad(p->scratch);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src},
                                          {DNNL_ARG_WEIGHTS, w},
                                          {DNNL_ARG_DST, dst},
                                          {DNNL_ARG_SCRATCHPAD, scratch}};
  if (a.b_data) args[DNNL_ARG_BIAS] = memory(p->user_b, eng, const_cast<float*>(a.b_data));
  p->prim.execute(s, args);
  if (p->dst_out) p->dst_out->execute(s, dst, user_dst);
  s.wait();
  if (fault_injected(KernelPath::kDnnlConv)) inject_error(a.y_data, 1);
  return true;
}

}  // namespace pipetrain::exec::cpu
