// Plain-layout convolution: every problem is viewed as 3-D (missing leading
// spatial axes have size 1), Conv as im2col + sgemm, ConvTranspose as
// sgemm + col2im (its adjoint). Used where oneDNN cannot run a case.
#include <algorithm>
#include <vector>

#include "executor/cpu/kernels/conv_impl.h"
#include "executor/cpu/kernels/pool_window.h"
#include "executor/cpu/kernels/sgemm.h"
#include "executor/cpu/kernels/window3.h"

namespace pipetrain::exec::cpu {

// col (channels * K, O): col[(c, kd, kh, kw), (od, oh, ow)] = x[c, od*s + kd*d - pb, ...] or 0.
void im2col(const float* x, int64_t channels, const Window3& g, float* col) {
  int64_t o_size = g.out_size();
  const LastAxisRanges inside = last_axis_ranges(g);  // per kernel column kw
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t kd = 0; kd < g.k[0]; ++kd)
      for (int64_t kh = 0; kh < g.k[1]; ++kh)
        for (int64_t kw = 0; kw < g.k[2]; ++kw) {
          float* row = col + (((c * g.k[0] + kd) * g.k[1] + kh) * g.k[2] + kw) * o_size;
          const float* xc = x + c * g.in_size();
          // Along the last axis, output ow reads iw = ow s + off: inside the
          // input for ow in [lo, hi), padding (zeros) on either side.
          const int64_t off = kw * g.d[2] - g.pb[2], s = g.s[2], ow_n = g.out[2];
          const int64_t lo = inside.first[static_cast<size_t>(kw)];
          const int64_t hi = inside.last[static_cast<size_t>(kw)];
          for (int64_t od = 0; od < g.out[0]; ++od) {
            int64_t id = od * g.s[0] + kd * g.d[0] - g.pb[0];
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              int64_t ih = oh * g.s[1] + kh * g.d[1] - g.pb[1];
              float* dst = row + (od * g.out[1] + oh) * ow_n;
              if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
                std::fill(dst, dst + ow_n, 0.0f);
                continue;
              }
              const float* src = xc + (id * g.in[1] + ih) * g.in[2];
              std::fill(dst, dst + lo, 0.0f);
              if (s == 1)  // a contiguous copy
                std::copy(src + lo + off, src + hi + off, dst + lo);
              else
                for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * s + off];
              std::fill(dst + hi, dst + ow_n, 0.0f);
            }
          }
        }
}

namespace {

// Adjoint of im2col with the roles of in/out swapped: col (channels * K, I)
// holds per-input-position contributions; y[c, i*s + k*d - pb] += col.
void col2im(const float* col, int64_t channels, const Window3& g, float* y) {
  int64_t i_size = g.in_size();
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t kd = 0; kd < g.k[0]; ++kd)
      for (int64_t kh = 0; kh < g.k[1]; ++kh)
        for (int64_t kw = 0; kw < g.k[2]; ++kw) {
          const float* row = col + (((c * g.k[0] + kd) * g.k[1] + kh) * g.k[2] + kw) * i_size;
          float* yc = y + c * g.out_size();
          for (int64_t id = 0; id < g.in[0]; ++id) {
            int64_t od = id * g.s[0] + kd * g.d[0] - g.pb[0];
            if (od < 0 || od >= g.out[0]) continue;
            for (int64_t ih = 0; ih < g.in[1]; ++ih) {
              int64_t oh = ih * g.s[1] + kh * g.d[1] - g.pb[1];
              if (oh < 0 || oh >= g.out[1]) continue;
              const float* src = row + (id * g.in[1] + ih) * g.in[2];
              float* dst = yc + (od * g.out[1] + oh) * g.out[2];
              for (int64_t iw = 0; iw < g.in[2]; ++iw) {
                int64_t ow = iw * g.s[2] + kw * g.d[2] - g.pb[2];
                if (ow >= 0 && ow < g.out[2]) dst[ow] += src[iw];
              }
            }
          }
        }
}

void add_bias(float* y, const float* b, int64_t channels, int64_t size) {
  for (int64_t m = 0; m < channels; ++m)
    for (int64_t i = 0; i < size; ++i) y[m * size + i] += b[m];
}

}  // namespace

void conv_plain(const ConvArgs& a) {
  Window3 g = to_window3(a.geo);
  const int64_t n_batch = a.x[0], c_in = a.x[1], m_out = a.y[1], groups = a.group;
  const int64_t cg = c_in / groups, mg = m_out / groups;  // channels per group
  const int64_t k = g.k_size(), i_size = g.in_size(), o_size = g.out_size();
  if (!a.transposed) {
    bool direct = k == 1;  // 1x1, stride 1, no padding: X already is the column matrix
    for (int i = 0; i < 3; ++i)
      direct = direct && g.s[i] == 1 && g.pb[i] == 0 && g.out[i] == g.in[i];
    std::vector<float> col(direct ? 0 : static_cast<size_t>(cg * k * o_size));  // (Cg K, O)
    for (int64_t n = 0; n < n_batch; ++n)
      for (int64_t gi = 0; gi < groups; ++gi) {
        const float* xg = a.x_data + (n * c_in + gi * cg) * i_size;  // (Cg, I)
        if (!direct) im2col(xg, cg, g, col.data());
        const float* cols = direct ? xg : col.data();
        float* yg = a.y_data + (n * m_out + gi * mg) * o_size;  // (Mg, O)
        const float* wg = a.w_data + gi * mg * cg * k;          // (Mg, Cg K)
        blas_sgemm(false, false, mg, o_size, cg * k, 1.0f, wg, cg * k, cols, o_size, 0.0f, yg,
                   o_size);
        if (a.b_data) add_bias(yg, a.b_data + gi * mg, mg, o_size);
      }
    return;
  }
  std::fill(a.y_data, a.y_data + n_batch * m_out * o_size, 0.0f);  // col2im accumulates
  std::vector<float> col(static_cast<size_t>(mg * k * i_size));    // (Mg K, I)
  for (int64_t n = 0; n < n_batch; ++n)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* xg = a.x_data + (n * c_in + gi * cg) * i_size;  // (Cg, I)
      const float* wg = a.w_data + gi * cg * mg * k;               // (Cg, Mg K)
      blas_sgemm(true, false, mg * k, i_size, cg, 1.0f, wg, mg * k, xg, i_size, 0.0f, col.data(),
                 i_size);
      float* yg = a.y_data + (n * m_out + gi * mg) * o_size;  // (Mg, O)
      col2im(col.data(), mg, g, yg);
      if (a.b_data) add_bias(yg, a.b_data + gi * mg, mg, o_size);
    }
}

}  // namespace pipetrain::exec::cpu
