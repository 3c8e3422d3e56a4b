// Shared implementations of Conv, ConvTranspose and their gradients as the
// CPU's plain path computes them (conv_plain.cc, grad_conv.cc): im2col and
// col2im are per-element functors here, the matrix products go to the Exec's
// GEMM (cblas on the host, cuBLAS on a GPU), and bias sums fold in the CPU's
// order. Every window is viewed as 3-D (missing axes have size 1).
#pragma once

#include "executor/cpu/kernels/conv_impl.h"
#include "executor/device/elementwise_math.h"
#include "executor/device/fused_epilogue.h"
#include "executor/device/ops_pool.h"
#include "executor/device/row_math.h"

namespace pipetrain::exec::device {

/// col (channels K, O): col[(c, kd, kh, kw), o] = x[c, o*s + k*d - pb] or 0 outside.
struct Im2Col {
  const float* x;  // (channels, I)
  float* col;
  Win3 g;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t os = g.out_size(), row = i / os, o = i - row * os;
    const int64_t kw = row % g.k[2], kh = (row / g.k[2]) % g.k[1],
                  kd = (row / (g.k[2] * g.k[1])) % g.k[0];
    const int64_t c = row / (g.k[0] * g.k[1] * g.k[2]);
    const int64_t ow = o % g.out[2], oh = (o / g.out[2]) % g.out[1], od = o / (g.out[2] * g.out[1]);
    const int64_t id = od * g.s[0] + kd * g.d[0] - g.pb[0];
    const int64_t ih = oh * g.s[1] + kh * g.d[1] - g.pb[1];
    const int64_t iw = ow * g.s[2] + kw * g.d[2] - g.pb[2];
    const bool inside =
        id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2];
    col[i] = inside ? x[c * g.in_size() + (id * g.in[1] + ih) * g.in[2] + iw] : 0.0f;
  }
};

/// The adjoint of im2col, gathered: y[c, o] = sum over taps (kd, kh, kw) in
/// order of col[(c, k), i] for the input position i that tap maps onto o
/// (CPU col2im adds them in that order into a zeroed y).
struct Col2Im {
  const float* col;  // (channels K, I)
  float* y;          // (channels, O)
  Win3 g;
  PIPETRAIN_HD void operator()(int64_t e) const {
    const int64_t os = g.out_size(), c = e / os, o = e - c * os;
    const int64_t ow = o % g.out[2], oh = (o / g.out[2]) % g.out[1], od = o / (g.out[2] * g.out[1]);
    const int64_t is = g.in_size();
    float s = 0.0f;
    for (int64_t kd = 0; kd < g.k[0]; ++kd) {
      const int64_t nd = od + g.pb[0] - kd * g.d[0];
      if (nd < 0 || nd % g.s[0] != 0 || nd / g.s[0] >= g.in[0]) continue;
      for (int64_t kh = 0; kh < g.k[1]; ++kh) {
        const int64_t nh = oh + g.pb[1] - kh * g.d[1];
        if (nh < 0 || nh % g.s[1] != 0 || nh / g.s[1] >= g.in[1]) continue;
        for (int64_t kw = 0; kw < g.k[2]; ++kw) {
          const int64_t nw = ow + g.pb[2] - kw * g.d[2];
          if (nw < 0 || nw % g.s[2] != 0 || nw / g.s[2] >= g.in[2]) continue;
          const int64_t row = ((c * g.k[0] + kd) * g.k[1] + kh) * g.k[2] + kw;
          s += col[row * is + ((nd / g.s[0]) * g.in[1] + nh / g.s[1]) * g.in[2] + nw / g.s[2]];
        }
      }
    }
    y[e] = s;
  }
};

/// y[m, i] += b[m] over (channels, size) blocks of one group.
struct AddBias {
  float* y;
  const float* b;
  int64_t size;
  PIPETRAIN_HD void operator()(int64_t i) const { y[i] += b[i / size]; }
};

/// dB[m]: dY summed over (N, O...) per output channel, in two levels
/// (row_math.h's plane sums), in double.
template <typename Exec>
void bias_grad(Exec& ex, const float* dy, float* db, int64_t n_batch, int64_t m_out,
               int64_t o_size) {
  double* part = ex.template scratch<double>(n_batch * m_out);  // (N, M)
  plane_sums(ex, dy, part, n_batch * m_out, o_size);
  ex.for_each(m_out, ChannelTotal<float>{part, db, n_batch, m_out, 1.0});
}

/// conv_plain: Conv as im2col + GEMM per sample and group; ConvTranspose as
/// GEMM + col2im.
template <typename Exec>
void conv_run(Exec& ex, const cpu::ConvArgs& a) {
  const Win3 g = win3(a.geo);
  const int64_t n_batch = a.x[0], c_in = a.x[1], m_out = a.y[1], groups = a.group;
  const int64_t cg = c_in / groups, mg = m_out / groups;
  const int64_t k = g.k[0] * g.k[1] * g.k[2], i_size = g.in_size(), o_size = g.out_size();
  if (!a.transposed) {
    float* col = ex.template scratch<float>(cg * k * o_size);
    for (int64_t n = 0; n < n_batch; ++n)
      for (int64_t gi = 0; gi < groups; ++gi) {
        const float* xg = a.x_data + (n * c_in + gi * cg) * i_size;
        ex.for_each(cg * k * o_size, Im2Col{xg, col, g});
        float* yg = a.y_data + (n * m_out + gi * mg) * o_size;
        ex.gemm(false, false, mg, o_size, cg * k, 1.0f, a.w_data + gi * mg * cg * k, cg * k, col,
                o_size, 0.0f, yg, o_size);
        if (a.b_data) ex.for_each(mg * o_size, AddBias{yg, a.b_data + gi * mg, o_size});
      }
    return;
  }
  float* col = ex.template scratch<float>(mg * k * i_size);
  for (int64_t n = 0; n < n_batch; ++n)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* xg = a.x_data + (n * c_in + gi * cg) * i_size;
      ex.gemm(true, false, mg * k, i_size, cg, 1.0f, a.w_data + gi * cg * mg * k, mg * k, xg,
              i_size, 0.0f, col, i_size);
      float* yg = a.y_data + (n * m_out + gi * mg) * o_size;
      ex.for_each(mg * o_size, Col2Im{col, yg, g});
      if (a.b_data) ex.for_each(mg * o_size, AddBias{yg, a.b_data + gi * mg, o_size});
    }
}

inline cpu::ConvArgs conv_shapes(const ir::Node& n, bool transposed, const ir::Shape& x,
                                 const ir::Shape& w, const ir::Shape& y) {
  cpu::ConvArgs a;
  a.transposed = transposed;
  a.group = n.attr_int("group", 1);
  a.x = x;
  a.w = w;
  a.y = y;
  const ir::Shape in_spatial(x.begin() + 2, x.end());
  const std::vector<int64_t> kernel(w.begin() + 2, w.end());
  a.geo = transposed ? ir::transpose_geometry(n, in_spatial, kernel)
                     : ir::window_geometry(n, in_spatial, kernel, /*ceil_mode=*/false);
  return a;
}

template <bool kTransposed, typename Exec>
void conv_op(Exec& ex, DeviceOpArgs& args) {
  cpu::ConvArgs a =
      conv_shapes(args.n(), kTransposed, args.in[0].shape, args.in[1].shape, args.out[0].shape);
  if (ir::numel(a.y) == 0) return;
  a.x_data = args.in[0].data<float>();
  a.w_data = args.in[1].data<float>();
  a.b_data = args.has_in(2) ? args.in[2].data<float>() : nullptr;
  a.y_data = args.out[0].data<float>();
  conv_run(ex, a);
  if (!kTransposed)
    fused_epilogue(ex, args.n(), a.y_data, args.has_in(3) ? args.in[3].data<float>() : nullptr,
                   ir::numel(a.y));
}

/// The forward a ConvGrad / ConvTransposeGrad node (dY, X, W) differentiates;
/// ModelError when dY is not that forward's output.
inline cpu::ConvArgs conv_grad_shapes(const ir::Node& n, bool transposed, const ir::Shape& dy,
                                      const ir::Shape& x, const ir::Shape& w) {
  cpu::ConvArgs a = conv_shapes(n, transposed, x, w, dy);
  cpu::check_conv_grad_shapes(n, a);
  return a;
}

/// (dY, X, W) -> (dX, dW, dB), each when present: dX by the adjoint op, dW by
/// im2col + GEMM accumulated over the samples, dB by bias_grad.
template <bool kTransposed, typename Exec>
void conv_grad_op(Exec& ex, DeviceOpArgs& args) {
  cpu::ConvArgs a =
      conv_grad_shapes(args.n(), kTransposed, args.in[0].shape, args.in[1].shape, args.in[2].shape);
  if (ir::numel(a.x) == 0 || ir::numel(a.y) == 0 || ir::numel(a.w) == 0) return;
  const float* dy = args.in[0].data<float>();
  a.x_data = args.in[1].data<float>();
  a.w_data = args.in[2].data<float>();
  if (args.has_out(0)) {
    cpu::ConvArgs adj;
    adj.transposed = !kTransposed;
    adj.group = a.group;
    adj.x = a.y;
    adj.w = a.w;
    adj.y = a.x;
    adj.geo = cpu::adjoint_geometry(a);
    adj.x_data = dy;
    adj.w_data = a.w_data;
    adj.y_data = args.out[0].data<float>();
    conv_run(ex, adj);
  }
  if (args.has_out(1)) {
    const int64_t n_batch = a.x[0], c_in = a.x[1], m_out = a.y[1], groups = a.group;
    const int64_t cg = c_in / groups, mg = m_out / groups;
    const Win3 fw = win3(a.geo);
    const int64_t k = fw.k[0] * fw.k[1] * fw.k[2], i_size = fw.in_size(), o_size = fw.out_size();
    const Win3 cw = kTransposed ? win3(cpu::adjoint_geometry(a)) : fw;
    const int64_t rows = (kTransposed ? mg : cg) * k, cols = kTransposed ? i_size : o_size;
    float* col = ex.template scratch<float>(rows * cols);
    float* dw = args.out[1].data<float>();
    for (int64_t gi = 0; gi < groups; ++gi)
      for (int64_t s = 0; s < n_batch; ++s) {
        const float* xg = a.x_data + (s * c_in + gi * cg) * i_size;
        const float* dyg = dy + (s * m_out + gi * mg) * o_size;
        const float beta = s == 0 ? 0.0f : 1.0f;
        if (!kTransposed) {
          ex.for_each(rows * cols, Im2Col{xg, col, cw});
          ex.gemm(false, true, mg, cg * k, o_size, 1.0f, dyg, o_size, col, o_size, beta,
                  dw + gi * mg * cg * k, cg * k);
        } else {
          ex.for_each(rows * cols, Im2Col{dyg, col, cw});
          ex.gemm(false, true, cg, mg * k, i_size, 1.0f, xg, i_size, col, i_size, beta,
                  dw + gi * cg * mg * k, mg * k);
        }
      }
  }
  if (args.has_out(2)) {
    const int64_t n_batch = a.y[0], m_out = a.y[1];
    bias_grad(ex, dy, args.out[2].data<float>(), n_batch, m_out,
              ir::numel(a.y) / (n_batch * m_out));
  }
}

}  // namespace pipetrain::exec::device
