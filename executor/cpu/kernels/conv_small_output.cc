// Conv and ConvGrad for outputs of a few positions per image, as GEMMs over
// the whole batch. oneDNN's AVX2 kernels work image by image over the
// output's positions; with 2x2 of them (ResNet's last stage at 64x64 input)
// they ran at 16-37 GFLOP/s where its other layers get 55-65. Putting the
// batch into the GEMMs' columns gives OpenBLAS products with N*O columns:
//   col (C*K, N*O)   every sample's im2col side by side
//   Y' = W col       (M, N*O), Y'[m, n*O + o] = Y[n, m, o]
//   dW = dY' col^T   (M, C*K), W's own layout
//   dcol = W^T dY'   (C*K, N*O), added back into dX by im2col's adjoint
#include <algorithm>
#include <vector>

#include "executor/cpu/kernels/bf16.h"
#include "executor/cpu/kernels/conv_impl.h"
#include "executor/cpu/kernels/sgemm.h"
#include "executor/cpu/kernels/window3.h"
#include "executor/device/row_math.h"

namespace pipetrain::exec::cpu {

namespace {

// Where the batched GEMMs beat oneDNN's backward on the AVX2 VM (ResNet-18's
// training step, `train_step --profile`): 2x2 outputs 2x faster, 4x4 ones
// 10% slower. The column buffer stays under 64 MiB.
constexpr int64_t kMaxPositions = 8;
constexpr int64_t kMaxColumnFloats = int64_t{16} << 20;

// The window's rows, (c, k) outermost and every sample's O positions side by
// side in each: col (C*K, N*O) is written (or read) one row at a time, so
// each row stays in cache while the samples fill it. x is (N, C, I).
template <typename Visit>
void for_each_tap(int64_t n_batch, int64_t channels, const Window3& g, Visit visit) {
  const int64_t o_size = g.out_size(), cols = n_batch * o_size;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t kd = 0; kd < g.k[0]; ++kd)
      for (int64_t kh = 0; kh < g.k[1]; ++kh)
        for (int64_t kw = 0; kw < g.k[2]; ++kw) {
          const int64_t row = ((c * g.k[0] + kd) * g.k[1] + kh) * g.k[2] + kw;
          for (int64_t n = 0; n < n_batch; ++n) {
            const int64_t plane = (n * channels + c) * g.in_size(), at = row * cols + n * o_size;
            for (int64_t od = 0; od < g.out[0]; ++od) {
              const int64_t id = od * g.s[0] + kd * g.d[0] - g.pb[0];
              for (int64_t oh = 0; oh < g.out[1]; ++oh) {
                const int64_t ih = oh * g.s[1] + kh * g.d[1] - g.pb[1];
                const bool inside = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1];
                const int64_t base = at + (od * g.out[1] + oh) * g.out[2];
                for (int64_t ow = 0; ow < g.out[2]; ++ow) {
                  const int64_t iw = ow * g.s[2] + kw * g.d[2] - g.pb[2];
                  // -1: outside the input (a zero of the padding)
                  const int64_t xi = inside && iw >= 0 && iw < g.in[2]
                                         ? plane + (id * g.in[1] + ih) * g.in[2] + iw
                                         : -1;
                  visit(base + ow, xi);
                }
              }
            }
          }
        }
}

// Row-major Y (m, n) = op(A) op(B): OpenBLAS, or oneDNN's bf16 matmul under
// a.bf16 (the caller rounds the outputs). A is W where `a_is_w`.
void gemm(const ConvArgs& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, bool a_is_w, const float* b, int64_t ldb, float* y) {
  if (c.bf16 && gemm_on_bf16(ta, tb, m, n, k, a, lda, a_is_w && c.w_is_value, b, ldb, false,
                             c.values_version, y))
    return;
  // Under bf16 only where oneDNN has no matmul: exact products of rounded copies.
  std::vector<float> ra, rb;
  if (c.bf16) {
    ra.assign(a, a + m * k);
    rb.assign(b, b + k * n);
    round_bf16_in_place(ra.data(), m * k);
    round_bf16_in_place(rb.data(), k * n);
    a = ra.data();
    b = rb.data();
  }
  blas_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, y, n);
}

bool small_output(const ConvArgs& a, const Window3& w) {
  if (a.transposed || a.group != 1 || a.x_blocked || a.y_blocked) return false;
  const int64_t taps = a.x[1] * w.k_size(), cols = a.x[0] * w.out_size();
  return w.out_size() <= kMaxPositions && taps * cols <= kMaxColumnFloats;
}

}  // namespace

bool small_output_case(const ConvArgs& a) {
  ConvArgs row_major = a;
  row_major.x_blocked = row_major.y_blocked = false;
  return small_output(row_major, to_window3(a.geo));
}

bool conv_small_output(const ConvArgs& a) {
  const Window3 w = to_window3(a.geo);
  if (!small_output(a, w)) return false;
  const int64_t n_batch = a.x[0], c_in = a.x[1], m_out = a.y[1];
  const int64_t o_size = w.out_size(), taps = c_in * w.k_size(), cols = n_batch * o_size;
  std::vector<float> col(static_cast<size_t>(taps * cols)), yt(static_cast<size_t>(m_out * cols));
  for_each_tap(n_batch, c_in, w, [&](int64_t ci, int64_t xi) {
    col[static_cast<size_t>(ci)] = xi < 0 ? 0.0f : a.x_data[xi];
  });
  gemm(a, false, false, m_out, cols, taps, a.w_data, taps, true, col.data(), cols, yt.data());
  for (int64_t n = 0; n < n_batch; ++n)
    for (int64_t m = 0; m < m_out; ++m) {
      const float b = a.b_data ? a.b_data[m] : 0.0f;
      const float* src = yt.data() + m * cols + n * o_size;
      float* dst = a.y_data + (n * m_out + m) * o_size;
      for (int64_t o = 0; o < o_size; ++o) {
        const float v = src[o] + b;
        dst[o] = a.relu && v < 0.0f ? 0.0f : v;
      }
    }
  return true;
}

bool conv_grad_small_output(const ConvGradArgs& g) {
  const ConvArgs& a = g.conv;
  const Window3 w = to_window3(a.geo);
  if ((!g.dx && !g.dw) || !small_output(a, w)) return false;
  const int64_t n_batch = a.x[0], c_in = a.x[1], m_out = a.y[1];
  const int64_t o_size = w.out_size(), i_size = w.in_size(), taps = c_in * w.k_size();
  const int64_t cols = n_batch * o_size;

  std::vector<float> dyt(static_cast<size_t>(m_out * cols));  // dY'
  for (int64_t n = 0; n < n_batch; ++n)
    for (int64_t m = 0; m < m_out; ++m)
      for (int64_t o = 0; o < o_size; ++o)
        dyt[static_cast<size_t>(m * cols + n * o_size + o)] = g.dy[(n * m_out + m) * o_size + o];
  if (a.bf16) round_bf16_in_place(dyt.data(), m_out * cols);  // dB sums it as it is
  std::vector<float> col(static_cast<size_t>(taps * cols));
  if (g.dw) {
    for_each_tap(n_batch, c_in, w, [&](int64_t ci, int64_t xi) {
      col[static_cast<size_t>(ci)] = xi < 0 ? 0.0f : a.x_data[xi];
    });
    gemm(a, false, true, m_out, taps, cols, dyt.data(), cols, false, col.data(), cols, g.dw);
  }
  if (g.dx) {
    gemm(a, true, false, taps, cols, m_out, a.w_data, taps, true, dyt.data(), cols, col.data());
    std::fill(g.dx, g.dx + n_batch * c_in * i_size, 0.0f);
    for_each_tap(n_batch, c_in, w, [&](int64_t ci, int64_t xi) {
      if (xi >= 0) g.dx[xi] += col[static_cast<size_t>(ci)];
    });
  }
  if (g.db)  // in bias_grad's order: per (n, m) plane in sum_row's lanes, then over n
    for (int64_t m = 0; m < m_out; ++m) {
      double sum = 0;
      for (int64_t n = 0; n < n_batch; ++n)
        sum += device::sum_row(dyt.data() + m * cols + n * o_size, o_size);
      g.db[m] = static_cast<float>(sum);
    }
  return true;
}

}  // namespace pipetrain::exec::cpu
