// ConvGrad and ConvTransposeGrad (f32): (dY, X, W) -> (dX, dW, dB), each
// output computed only when it is present. oneDNN's backward primitives do
// the work (convolution_backward_data / _weights and their deconvolution
// twins), built over the forward's window and weight view (conv_dnnl.cc)
// with memory format `any` and cached per shapes + attributes like the
// forward's. Where oneDNN cannot express the window (a negative begin pad of
// ConvTranspose) the plain path runs: dX is the adjoint op over the same
// window (Conv <-> ConvTranspose, through conv_plain) and dW an im2col + sgemm
// per sample.
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/bf16.h"
#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/cpu/kernels/conv_impl.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/cpu/kernels/dnnl_util.h"
#include "executor/cpu/kernels/kernel_paths.h"
#include "executor/cpu/kernels/sgemm.h"
#include "executor/device/row_math.h"
#include "ir/error.h"

namespace pipetrain::exec::cpu {

namespace {

using dnnl::memory;
namespace du = dnnl_util;

// One tensor argument of a primitive: the plain user layout, the layout the
// primitive chose and the reorder between them (absent when they agree).
struct Operand {
  memory::desc user, inner;
  std::optional<dnnl::reorder> reorder;

  void init(const memory::desc& user_desc, const memory::desc& inner_desc, bool is_input) {
    user = user_desc;
    inner = inner_desc;
    if (user == inner) return;
    auto& eng = du::engine();
    reorder = is_input ? dnnl::reorder(memory(user, eng), memory(inner, eng))
                       : dnnl::reorder(memory(inner, eng), memory(user, eng));
  }
  /// The input's bytes in the primitive's layout (reordered now if they differ).
  memory bind_input(const float* data) const {
    auto& eng = du::engine();
    memory u(user, eng, const_cast<float*>(data));  // oneDNN takes non-const; only read
    if (!reorder) return u;
    memory m(inner, eng);
    reorder->execute(du::stream(), u, m);
    return m;
  }
  /// Where the primitive writes the output; finish_output copies it to `data`.
  memory bind_output(float* data) const {
    return reorder ? memory(inner, du::engine()) : memory(user, du::engine(), data);
  }
  void finish_output(memory m, float* data) const {
    if (!reorder) return;
    memory u(user, du::engine(), data);
    reorder->execute(du::stream(), m, u);
  }
};

// dX = backward_data(dY, W).
struct DataPrimitive {
  dnnl::primitive prim;
  Operand dy, w, dx;
  memory::desc scratch;
  du::WeightCache weights;  // W in its layout (not the forward's), once per update
};

// dW (and dB when fused) = backward_weights(X, dY).
struct WeightsPrimitive {
  dnnl::primitive prim;
  Operand x, dy, dw;
  memory::desc db, scratch;  // db: plain (M), when fused
};

template <typename FwdT, typename DataT, typename WeightsT, dnnl::algorithm kAlg>
struct OpFamily {
  using Fwd = FwdT;
  using Data = DataT;
  using Weights = WeightsT;
  static constexpr dnnl::algorithm kAlgorithm = kAlg;
};
using ConvFamily =
    OpFamily<dnnl::convolution_forward, dnnl::convolution_backward_data,
             dnnl::convolution_backward_weights, dnnl::algorithm::convolution_direct>;
using DeconvFamily =
    OpFamily<dnnl::deconvolution_forward, dnnl::deconvolution_backward_data,
             dnnl::deconvolution_backward_weights, dnnl::algorithm::deconvolution_direct>;

// The descriptors of X, dY, dX and W as oneDNN sees them: row-major, or the
// blocked layout for activations the runner keeps blocked.
struct UserDescs {
  memory::desc x, y, dx, w, b;
  UserDescs(const ConvArgs& a, bool dx_blocked) {
    x = a.x_blocked ? blocked_desc(a.x) : du::plain_desc(a.x);
    y = a.y_blocked ? blocked_desc(a.y) : du::plain_desc(a.y);
    dx = dx_blocked ? blocked_desc(a.x) : du::plain_desc(a.x);
    ir::Shape dims, strides;
    dnnl_weights_view(a, &dims, &strides);
    w = du::plain_desc(dims, strides);
    b = du::plain_desc({a.y[1]});
  }
};

// The backward primitives need the forward's primitive descriptor as a hint.
template <typename F>
typename F::Fwd::primitive_desc forward_hint(const UserDescs& u, const DnnlWindow& win, bool bf16) {
  auto any = [&](const memory::desc& d) { return du::any_layout(d, bf16); };
  typename F::Fwd::desc d(dnnl::prop_kind::forward_training, F::kAlgorithm, any(u.x), any(u.w),
                          any(u.y), win.strides, win.dilates, win.pad_l, win.pad_r);
  return typename F::Fwd::primitive_desc(d, du::engine());
}

dnnl::primitive_attr user_scratchpad() {
  // Our scratchpad, so one cached primitive may run on several threads at once.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

template <typename F>
std::shared_ptr<DataPrimitive> make_data(const ConvArgs& a, bool dx_blocked) {
  DnnlWindow win;
  if (!dnnl_window(a, &win)) return nullptr;
  UserDescs u(a, dx_blocked);
  auto any = [&](const memory::desc& d) { return du::any_layout(d, a.bf16); };
  auto p = std::make_shared<DataPrimitive>();
  try {
    typename F::Data::desc d(F::kAlgorithm, any(u.x), any(u.w), any(u.y), win.strides, win.dilates,
                             win.pad_l, win.pad_r);
    typename F::Data::primitive_desc pd(d, user_scratchpad(), du::engine(),
                                        forward_hint<F>(u, win, a.bf16));
    p->dx.init(u.dx, pd.diff_src_desc(), false);
    p->w.init(u.w, pd.weights_desc(), true);
    p->dy.init(u.y, pd.diff_dst_desc(), true);
    p->scratch = pd.scratchpad_desc();
    p->prim = typename F::Data(pd);
  } catch (const dnnl::error&) {
    return nullptr;  // not expressible in oneDNN: the plain path runs instead
  }
  return p;
}

template <typename F>
std::shared_ptr<WeightsPrimitive> make_weights(const ConvArgs& a, bool with_bias) {
  DnnlWindow win;
  if (!dnnl_window(a, &win)) return nullptr;
  UserDescs u(a, false);
  auto any = [&](const memory::desc& d) { return du::any_layout(d, a.bf16); };
  auto p = std::make_shared<WeightsPrimitive>();
  try {
    auto d = with_bias ? typename F::Weights::desc(F::kAlgorithm, any(u.x), any(u.w), u.b, any(u.y),
                                                   win.strides, win.dilates, win.pad_l, win.pad_r)
                       : typename F::Weights::desc(F::kAlgorithm, any(u.x), any(u.w), any(u.y),
                                                   win.strides, win.dilates, win.pad_l, win.pad_r);
    typename F::Weights::primitive_desc pd(d, user_scratchpad(), du::engine(),
                                           forward_hint<F>(u, win, a.bf16));
    p->x.init(u.x, pd.src_desc(), true);
    p->dw.init(u.w, pd.diff_weights_desc(), false);
    p->dy.init(u.y, pd.diff_dst_desc(), true);
    if (with_bias) p->db = pd.diff_bias_desc();  // u.b as given: plain (M)
    p->scratch = pd.scratchpad_desc();
    p->prim = typename F::Weights(pd);
  } catch (const dnnl::error&) {
    return nullptr;
  }
  return p;
}

std::shared_ptr<DataPrimitive> data_primitive(const ConvArgs& a, bool dx_blocked) {
  return du::cached_as<DataPrimitive>(
      conv_cache_key(a) + " bwd_data" + (dx_blocked ? " dx:blocked" : ""), [&] {
        return a.transposed ? make_data<DeconvFamily>(a, dx_blocked)
                            : make_data<ConvFamily>(a, dx_blocked);
      });
}

std::shared_ptr<WeightsPrimitive> weights_primitive(const ConvArgs& a, bool with_bias) {
  return du::cached_as<WeightsPrimitive>(
      conv_cache_key(a) + " bwd_weights" + (with_bias ? " bias" : ""), [&] {
        return a.transposed ? make_weights<DeconvFamily>(a, with_bias)
                            : make_weights<ConvFamily>(a, with_bias);
      });
}

// dB[m] = sum over n and o of dY[n, m, o], in double: per (n, m) plane in
// sum_row's lanes, then over n in order, as the device backends' bias_grad
// (ops_conv.h), so they agree bit for bit. (One serial sum took 2.2 ms of
// LeNet's first ConvGrad, an add's latency per element.)
void bias_grad(const ConvGradArgs& g) {
  const ir::Shape& y = g.conv.y;
  const int64_t n_batch = y[0], m_out = y[1], o_size = ir::numel(y) / (n_batch * m_out);
  for (int64_t m = 0; m < m_out; ++m) {
    double sum = 0;
    for (int64_t n = 0; n < n_batch; ++n)
      sum += device::sum_row(g.dy + (n * m_out + m) * o_size, o_size);
    g.db[m] = static_cast<float>(sum);
  }
}

}  // namespace

bool conv_grad_dnnl(const ConvGradArgs& g) {
  if (path_avoided(KernelPath::kDnnlConvGrad))
    return false;  // the kernel check found it wrong here
  const ConvArgs& a = g.conv;
  std::shared_ptr<DataPrimitive> dp = g.dx ? data_primitive(a, g.dx_blocked) : nullptr;
  if (g.dx && !dp) return false;
  const bool fused_bias = g.db && g.dw;  // dB alone is a plain sum (bias_grad)
  std::shared_ptr<WeightsPrimitive> wp = g.dw ? weights_primitive(a, fused_bias) : nullptr;
  if (g.dw && !wp) return false;
  auto& eng = du::engine();
  auto& s = du::stream();
  memory dy_data;  // dY in dp's layout, reused by wp when the layouts agree
  if (dp) {
    dy_data = dp->dy.bind_input(g.dy);
    memory w = dp->w.reorder ? dp->weights.get(*dp->w.reorder, dp->w.user, dp->w.inner, a.w_data,
                                               a.w_is_value, a.values_version)
                             : dp->w.bind_input(a.w_data);
    memory dx = dp->dx.bind_output(g.dx);
    memory scratch = du::scratchpad(dp->scratch);
    dp->prim.execute(s, {{DNNL_ARG_DIFF_DST, dy_data},
                         {DNNL_ARG_WEIGHTS, w},
                         {DNNL_ARG_DIFF_SRC, dx},
                         {DNNL_ARG_SCRATCHPAD, scratch}});
    dp->dx.finish_output(dx, g.dx);
    s.wait();
  }
  if (wp) {
    memory dy = dp && dp->dy.inner == wp->dy.inner ? dy_data : wp->dy.bind_input(g.dy);
    memory x = wp->x.bind_input(a.x_data);
    memory dw = wp->dw.bind_output(g.dw);
    memory scratch = du::scratchpad(wp->scratch);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, x},
                                            {DNNL_ARG_DIFF_DST, dy},
                                            {DNNL_ARG_DIFF_WEIGHTS, dw},
                                            {DNNL_ARG_SCRATCHPAD, scratch}};
    if (fused_bias) args[DNNL_ARG_DIFF_BIAS] = memory(wp->db, eng, g.db);
    wp->prim.execute(s, args);
    wp->dw.finish_output(dw, g.dw);
    s.wait();
  }
  if (g.db && !fused_bias) bias_grad(g);
  if (fault_injected(KernelPath::kDnnlConvGrad)) inject_error(g.dw ? g.dw : g.dx, 1);
  return true;
}

// The forward window seen from the other side: the adjoint op reads dY
// (spatial sizes a.y) and writes dX (spatial sizes a.x) over the same
// kernel, strides, dilations and begin pads. Conv's adjoint is a
// ConvTranspose and the other way round.
void check_conv_grad_shapes(const ir::Node& n, const ConvArgs& a) {
  ir::Shape want = {a.x[0], a.transposed ? a.w[1] * a.group : a.w[0]};
  want.insert(want.end(), a.geo.out.begin(), a.geo.out.end());
  const int64_t c_want = a.transposed ? a.w[0] : a.w[1] * a.group;
  if (a.y != want || a.x[1] != c_want)
    throw ModelError(n.describe() + ": dY " + ir::shape_str(a.y) + " does not match the output " +
                     ir::shape_str(want) + " of the forward with X " + ir::shape_str(a.x) +
                     " and W " + ir::shape_str(a.w));
}

ir::WindowGeometry adjoint_geometry(const ConvArgs& a) {
  ir::WindowGeometry g = a.geo;
  std::swap(g.in, g.out);
  for (size_t i = 0; i < g.rank(); ++i) {
    g.output_padding[i] = 0;
    // The adjoint's end pad, from out = s (in - 1) + extent - pb - pe for a
    // transposed adjoint, or in + pb + pe - extent = s (out - 1) for a Conv.
    g.pads_end[i] = a.transposed
                        ? g.strides[i] * (g.out[i] - 1) + g.extent(i) - g.pads_begin[i] - g.in[i]
                        : g.strides[i] * (g.in[i] - 1) + g.extent(i) - g.pads_begin[i] - g.out[i];
  }
  return g;
}

namespace {

// dW without oneDNN, per group and sample.
// Conv, W (M, C/G, k): dW_g (Mg, Cg K) += dY_g (Mg, O) im2col(X_g)^T.
// ConvTranspose, W (C, M/G, k): dW_g (Cg, Mg K) += X_g (Cg, I) im2col'(dY_g)^T
// with im2col' over the adjoint window (its input is dY, its output X's grid).
void weights_plain(const ConvGradArgs& g) {
  const ConvArgs& a = g.conv;
  const int64_t n_batch = a.x[0], c_in = a.x[1], m_out = a.y[1], groups = a.group;
  const int64_t cg = c_in / groups, mg = m_out / groups;  // channels per group
  const Window3 fw = to_window3(a.geo);
  const int64_t k = fw.k_size(), i_size = fw.in_size(), o_size = fw.out_size();
  // Conv: col (Cg K, O) from X; ConvTranspose: col (Mg K, I) from dY.
  const Window3 cw = a.transposed ? to_window3(adjoint_geometry(a)) : fw;
  const int64_t col_rows = (a.transposed ? mg : cg) * k, col_cols = a.transposed ? i_size : o_size;
  std::vector<float> col(static_cast<size_t>(col_rows * col_cols));
  // LeNet's first layer: 64 products of 32 x 25 x 784, 6.7 ms on 2 threads
  // against 3.6-4.8 on one; a product this small runs on the calling thread.
  const int64_t macs = (a.transposed ? cg * mg * k * i_size : mg * cg * k * o_size);
  std::optional<OneThreadScope> one_thread;
  if (macs <= (int64_t{1} << 22)) one_thread.emplace();
  for (int64_t gi = 0; gi < groups; ++gi)
    for (int64_t n = 0; n < n_batch; ++n) {
      const float* xg = a.x_data + (n * c_in + gi * cg) * i_size;  // (Cg, I)
      const float* dyg = g.dy + (n * m_out + gi * mg) * o_size;    // (Mg, O)
      const float beta = n == 0 ? 0.0f : 1.0f;
      if (!a.transposed) {
        im2col(xg, cg, cw, col.data());
        blas_sgemm(false, true, mg, cg * k, o_size, 1.0f, dyg, o_size, col.data(), o_size, beta,
                   g.dw + gi * mg * cg * k, cg * k);
      } else {
        im2col(dyg, mg, cw, col.data());
        blas_sgemm(false, true, cg, mg * k, i_size, 1.0f, xg, i_size, col.data(), i_size, beta,
                   g.dw + gi * cg * mg * k, mg * k);
      }
    }
}

}  // namespace

void conv_grad_plain(const ConvGradArgs& g) {
  const ConvArgs& a = g.conv;
  if (g.dx) {
    ConvArgs adj;
    adj.transposed = !a.transposed;
    adj.group = a.group;
    adj.x = a.y;
    adj.w = a.w;  // Conv W (M, C/G, k) read as ConvTranspose (C', M'/G, k) and back
    adj.y = a.x;
    adj.geo = adjoint_geometry(a);
    adj.x_data = g.dy;
    adj.w_data = a.w_data;
    adj.y_data = g.dx;
    conv_plain(adj);
  }
  if (g.dw) weights_plain(g);
  if (g.db) bias_grad(g);
}

namespace {

ConvGradArgs grad_args(KernelContext& ctx, bool transposed) {
  const ir::Node& n = ctx.n();
  const ir::Tensor& dy = ctx.in(0);  // (N, M, O...)
  const ir::Tensor& x = ctx.in(1);   // (N, C, D...)
  const ir::Tensor& w = ctx.in(2);   // Conv (M, C/G, k...); ConvTranspose (C, M/G, k...)
  ConvGradArgs g;
  ConvArgs& a = g.conv;
  a.transposed = transposed;
  a.group = n.attr_int("group", 1);
  a.x = x.shape();
  a.w = w.shape();
  a.y = dy.shape();
  ir::Shape in_spatial(a.x.begin() + 2, a.x.end());
  std::vector<int64_t> kernel(a.w.begin() + 2, a.w.end());
  a.geo = transposed ? ir::transpose_geometry(n, in_spatial, kernel)
                     : ir::window_geometry(n, in_spatial, kernel, /*ceil_mode=*/false);
  check_conv_grad_shapes(n, a);
  a.x_data = x.data<float>();
  a.w_data = w.data<float>();
  a.w_is_value = ctx.in_is_value(2);
  a.values_version = ctx.values_version;
  g.dy = dy.data<float>();
  g.dx = ctx.has_out(0) ? ctx.out(0).data<float>() : nullptr;
  g.dw = ctx.has_out(1) ? ctx.out(1).data<float>() : nullptr;
  g.db = ctx.has_out(2) ? ctx.out(2).data<float>() : nullptr;
  a.y_blocked = ctx.in_blocked(0);  // dY
  a.x_blocked = ctx.in_blocked(1);
  g.dx_blocked = ctx.out_blocked(0);
  return g;
}

// oneDNN's backward-weights kernel runs at a few GFLOP/s when each group has
// very few input channels (a network's first conv on 1-3 channel images);
// im2col + sgemm, with the short im2col rows, runs those at GEMM speed.
bool weights_by_im2col(const ConvGradArgs& g) {
  const ConvArgs& a = g.conv;
  const int64_t taps = (a.x[1] / a.group) * to_window3(a.geo).k_size();
  return !a.transposed && g.dw && taps <= 75;
}

void conv_grad_row_major(const ConvGradArgs& g) {
  if (conv_grad_small_output(g)) return;  // a few output positions per image
  if (weights_by_im2col(g)) {
    ConvGradArgs data_only = g;
    data_only.dw = data_only.db = nullptr;
    if (data_only.dx && !conv_grad_dnnl(data_only)) conv_grad_plain(data_only);
    weights_plain(g);
    if (g.db) bias_grad(g);
    return;
  }
  if (!conv_grad_dnnl(g)) conv_grad_plain(g);
}

// X, dY or dX blocked: oneDNN reads and writes them as they are; the paths
// that compute row-major get row-major copies.
void conv_grad_any_layout(const ConvGradArgs& g) {
  const ConvArgs& a = g.conv;
  const bool small = (g.dx || g.dw) && small_output_case(a);
  const bool plain_bias = g.db && !g.dw;  // bias_grad sums row-major planes
  if (!small && !plain_bias && !weights_by_im2col(g) && conv_grad_dnnl(g)) return;
  ConvGradArgs p = g;
  std::vector<float> x, dy, dx;
  p.conv.x_data = row_major_data(a.x_data, a.x, a.x_blocked, &x);
  p.dy = row_major_data(g.dy, a.y, a.y_blocked, &dy);
  if (g.dx_blocked && g.dx) {
    dx.resize(static_cast<size_t>(ir::numel(a.x)));
    p.dx = dx.data();
  }
  p.conv.x_blocked = p.conv.y_blocked = p.dx_blocked = false;
  conv_grad_row_major(p);
  if (g.dx_blocked && g.dx) to_blocked(dx.data(), g.dx, a.x);
}

void run_conv_grad(KernelContext& ctx, bool transposed) {
  ConvGradArgs g = grad_args(ctx, transposed);
  const ConvArgs& a = g.conv;
  // Empty tensors: the zero-filled outputs already are the gradients.
  if (ir::numel(a.x) == 0 || ir::numel(a.y) == 0 || ir::numel(a.w) == 0) return;
  if (a.x_blocked || a.y_blocked || g.dx_blocked) return conv_grad_any_layout(g);
  conv_grad_row_major(g);
}

}  // namespace

CpuKernel kernel_ConvGrad() {
  return {[](KernelContext& ctx) { run_conv_grad(ctx, false); }, {ir::DType::kF32}, 0};
}
// oneDNN's bf16 backward primitives (dX and dW come back rounded, a fused
// dB is rounded here); dB alone and what oneDNN cannot express take the fp32
// kernel on rounded copies.
CpuKernel kernel_bf16_ConvGrad() {
  return {[](KernelContext& ctx) {
            ConvGradArgs g = grad_args(ctx, false);
            const ConvArgs& a = g.conv;
            if (ir::numel(a.x) == 0 || ir::numel(a.y) == 0 || ir::numel(a.w) == 0) return;
            g.conv.bf16 = true;
            if (g.db && !g.dw) return run_on_rounded_copies(ctx, kernel_ConvGrad().fn);
            // A few output positions per image: the whole-batch GEMMs in bf16
            // (oneDNN's backward is as slow there in bf16 as in f32).
            if (conv_grad_small_output(g)) {
              if (g.dx) round_bf16_in_place(g.dx, ir::numel(a.x));
              if (g.dw) round_bf16_in_place(g.dw, ir::numel(a.w));
            } else if (!conv_grad_dnnl(g)) {
              return run_on_rounded_copies(ctx, kernel_ConvGrad().fn);
            }
            if (g.db) round_bf16_in_place(g.db, a.y[1]);
          },
          {ir::DType::kF32},
          0};
}

CpuKernel kernel_ConvTransposeGrad() {
  return {[](KernelContext& ctx) { run_conv_grad(ctx, true); }, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
