// LSTMGrad (f32): backpropagation through time of rnn.cc's LSTM. Inputs
// (X, W, R, B, sequence_lens, initial_h, initial_c, P, dY, dY_h, dY_c), outputs
// (dX, dW, dR, dB, dinitial_h, dinitial_c); absent upstream gradients are 0.
//
// Per direction the forward is recomputed as rnn.cc computes it, keeping each
// step's gate pre-activations z (i, o, f, c blocks, peepholes included) and
// the states it started from. Walking the steps backwards, with dh, dc the
// gradients of the state after the step (dh also gets dY at that step):
//   do = dh tanh(C'),   dC' = dc + dh o (1 - tanh(C')^2) + dz_o P_o
//   dz_o = do o (1 - o),  di = dC' g,  df = dC' C,  dg = dC' i
//   dz_i = di i (1 - i),  dz_f = df f (1 - f),  dz_c = dg (1 - g^2)
//   (input_forget: f = 1 - i, so di -= df and dz_f = 0)
//   dC = dC' f + dz_i P_i + dz_f P_f,   dH = dz R
// each dz also masked to 0 where clip clamped its input. Over all steps:
// dW = dz^T X, dR = dz^T H_prev, dWb = dRb = column sums of dz, dX += dz W,
// as one sgemm each. Batch entries past their sequence_lens have dz = 0 and
// pass dh, dc through unchanged (the forward keeps their state). P gets no
// gradient (the op has no dP output).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/rnn_attrs.h"
#include "executor/cpu/kernels/sgemm.h"
#include "ir/error.h"

namespace pipetrain::exec::cpu {

// Refuses what the LSTM shape rule refuses (LSTMGrad's schema shares only
// the attribute list).
void check_lstm_grad_attrs(const ir::Node& n) {
  const std::string direction = n.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    throw ModelError(n.describe() + ": direction '" + direction +
                     "' is not forward, reverse or bidirectional");
  const int64_t layout = n.attr_int("layout", 0);
  if (layout != 0 && layout != 1) throw ModelError(n.describe() + ": layout must be 0 or 1");
  if (n.has_attr("activations")) {
    const std::vector<std::string> acts = n.attr_strings("activations");
    bool ok = acts.size() == (direction == "bidirectional" ? 6u : 3u);
    for (size_t i = 0; ok && i < acts.size(); ++i)
      ok = acts[i] == (i % 3 == 0 ? "Sigmoid" : "Tanh");
    if (!ok)
      throw UnsupportedOp(n.describe() +
                          ": only the default activations (Sigmoid, Tanh, Tanh) are supported");
  }
  if (!n.attr_floats("activation_alpha").empty() || !n.attr_floats("activation_beta").empty())
    throw UnsupportedOp(n.describe() +
                        ": activation_alpha / activation_beta (only default activations)");
}

namespace {

float sigmoid(float v) {
  return 1.0f / (1.0f + std::exp(-v));
}

struct LstmDims {
  int64_t seq, batch, in, hidden, dirs;
  bool batch_major;  // layout 1
  // Offsets (in rows or elements) as rnn.cc's.
  int64_t x_row(int64_t t, int64_t b) const { return batch_major ? b * seq + t : t * batch + b; }
  /// Rows between batch entries of one step.
  int64_t row_step() const { return batch_major ? seq : 1; }
  int64_t y_off(int64_t t, int64_t d, int64_t b) const {
    return (batch_major ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * hidden;
  }
  int64_t state_off(int64_t d, int64_t b) const {
    return (batch_major ? b * dirs + d : d * batch + b) * hidden;
  }
};

// Row-major C (m, n) = alpha op(A) op(B) + beta C, skipping empty products.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  blas_sgemm(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

struct Gates {  // one (step, batch entry, unit), recomputed from z: i, f, g and C'
  float i, f, g, cn;
};

class LstmGrad {
 public:
  explicit LstmGrad(KernelContext& ctx) : ctx_(ctx) {
    const ir::Node& n = ctx.n();
    check_lstm_grad_attrs(n);
    const ir::Tensor& x = ctx.in(0);
    dm_.batch_major = n.attr_int("layout", 0) == 1;
    dm_.seq = x.shape()[dm_.batch_major ? 1 : 0];
    dm_.batch = x.shape()[dm_.batch_major ? 0 : 1];
    dm_.in = x.shape()[2];
    dm_.dirs = ctx.in(1).shape()[0];
    dm_.hidden = ctx.in(2).shape()[2];
    direction_ = n.attr_string("direction", "forward");
    has_clip_ = n.has_attr("clip");
    clip_ = n.attr_float("clip", 0.0f);
    input_forget_ = n.attr_int("input_forget", 0) != 0;
    lens_.assign(static_cast<size_t>(dm_.batch), dm_.seq);
    if (ctx.has_in(4))
      for (int64_t b = 0; b < dm_.batch; ++b)
        lens_[b] = std::clamp<int64_t>(static_cast<int64_t>(ctx.in(4).at(b)), 0, dm_.seq);
    const int64_t rows = dm_.seq * dm_.batch, h_n = dm_.hidden;
    z_.resize(static_cast<size_t>(rows * 4 * h_n));
    h_prev_.resize(static_cast<size_t>(rows * h_n));
    c_prev_.resize(static_cast<size_t>(rows * h_n));
    h_.resize(static_cast<size_t>(dm_.batch * h_n));
    c_.resize(static_cast<size_t>(dm_.batch * h_n));
    dh_.resize(h_.size());
    dc_.resize(h_.size());
    dh_new_.resize(h_.size());
  }

  void run() {
    for (int64_t d = 0; d < dm_.dirs; ++d) {
      forward(d);
      backward(d);
      weight_grads(d);
    }
  }

 private:
  bool reverse(int64_t d) const {
    return direction_ == "reverse" || (direction_ == "bidirectional" && d == 1);
  }
  float clamp(float v) const { return has_clip_ ? std::clamp(v, -clip_, clip_) : v; }
  // d clamp(v) / dv: 1 inside [-clip, clip], 0 where clip cut it.
  float pass(float v) const { return !has_clip_ || (v >= -clip_ && v <= clip_) ? 1.0f : 0.0f; }
  const float* w(int64_t d) const { return ctx_.in(1).data<float>() + d * 4 * dm_.hidden * dm_.in; }
  const float* r(int64_t d) const {
    return ctx_.in(2).data<float>() + d * 4 * dm_.hidden * dm_.hidden;
  }
  const float* p(int64_t d) const {
    return ctx_.has_in(7) ? ctx_.in(7).data<float>() + d * 3 * dm_.hidden : nullptr;  // (3H)
  }
  const float* in_or_null(size_t i) const {
    return ctx_.has_in(i) ? ctx_.in(i).data<float>() : nullptr;
  }

  // Unit j's input, forget and cell gates and new cell state, from its row of
  // z (peepholes on C already added) and the cell state before the step.
  Gates gates(const float* zr, float c_before, int64_t j) const {
    const int64_t h_n = dm_.hidden;
    Gates a;
    a.i = sigmoid(clamp(zr[j]));
    a.f = input_forget_ ? 1.0f - a.i : sigmoid(clamp(zr[2 * h_n + j]));
    a.g = std::tanh(clamp(zr[3 * h_n + j]));
    a.cn = a.f * c_before + a.i * a.g;
    return a;
  }

  // Recomputes direction d's steps, as rnn.cc, keeping z (rows, 4H) with the
  // peephole terms added and the states before each step (rows, H).
  void forward(int64_t d) {
    const int64_t h_n = dm_.hidden, g_n = 4 * h_n, rows = dm_.seq * dm_.batch;
    const float* pd = p(d);
    std::vector<float> bias(static_cast<size_t>(g_n), 0.0f);  // Wb + Rb
    if (ctx_.has_in(3)) {
      const float* bd = ctx_.in(3).data<float>() + d * 2 * g_n;  // (8H)
      for (int64_t j = 0; j < g_n; ++j) bias[j] = bd[j] + bd[g_n + j];
    }
    const float* h0 = in_or_null(5);
    const float* c0 = in_or_null(6);
    for (int64_t b = 0; b < dm_.batch; ++b)
      for (int64_t j = 0; j < h_n; ++j) {
        h_[b * h_n + j] = h0 ? h0[dm_.state_off(d, b) + j] : 0.0f;
        c_[b * h_n + j] = c0 ? c0[dm_.state_off(d, b) + j] : 0.0f;
      }
    gemm(false, true, rows, g_n, dm_.in, ctx_.in(0).data<float>(), dm_.in, w(d), dm_.in, 0.0f,
         z_.data(), g_n);
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t j = 0; j < g_n; ++j) z_[row * g_n + j] += bias[j];
    const int64_t ld = dm_.row_step() * g_n;  // between batch entries of one step
    for (int64_t s = 0; s < dm_.seq; ++s) {
      const int64_t t = reverse(d) ? dm_.seq - 1 - s : s;
      gemm(false, true, dm_.batch, g_n, h_n, h_.data(), h_n, r(d), h_n, 1.0f,
           z_.data() + dm_.x_row(t, 0) * g_n, ld);
      for (int64_t b = 0; b < dm_.batch; ++b) {
        const int64_t row = dm_.x_row(t, b);
        float* hb = h_.data() + b * h_n;
        float* cb = c_.data() + b * h_n;
        std::copy(hb, hb + h_n, h_prev_.data() + row * h_n);
        std::copy(cb, cb + h_n, c_prev_.data() + row * h_n);
        if (t >= lens_[b]) continue;  // outside this sequence: the state stays
        float* zr = z_.data() + row * g_n;
        for (int64_t j = 0; j < h_n; ++j) {
          if (pd) {
            zr[j] += pd[j] * cb[j];
            zr[2 * h_n + j] += pd[2 * h_n + j] * cb[j];
          }
          const Gates a = gates(zr, cb[j], j);
          if (pd) zr[h_n + j] += pd[h_n + j] * a.cn;
          const float o = sigmoid(clamp(zr[h_n + j]));
          cb[j] = a.cn;
          hb[j] = o * std::tanh(a.cn);
        }
      }
    }
  }

  // Walks the steps backwards; z_ becomes dz (rows, 4H).
  void backward(int64_t d) {
    const int64_t h_n = dm_.hidden, g_n = 4 * h_n;
    const float* pd = p(d);
    const float* dy = in_or_null(8);
    const float* dy_h = in_or_null(9);
    const float* dy_c = in_or_null(10);
    for (int64_t b = 0; b < dm_.batch; ++b)
      for (int64_t j = 0; j < h_n; ++j) {
        dh_[b * h_n + j] = dy_h ? dy_h[dm_.state_off(d, b) + j] : 0.0f;
        dc_[b * h_n + j] = dy_c ? dy_c[dm_.state_off(d, b) + j] : 0.0f;
      }
    const int64_t ld = dm_.row_step() * g_n;
    for (int64_t s = dm_.seq; s-- > 0;) {
      const int64_t t = reverse(d) ? dm_.seq - 1 - s : s;
      for (int64_t b = 0; b < dm_.batch; ++b) {
        const int64_t row = dm_.x_row(t, b);
        float* zr = z_.data() + row * g_n;
        if (t >= lens_[b]) {
          std::fill(zr, zr + g_n, 0.0f);
          continue;
        }
        float* dhb = dh_.data() + b * h_n;
        float* dcb = dc_.data() + b * h_n;
        if (dy)
          for (int64_t j = 0; j < h_n; ++j) dhb[j] += dy[dm_.y_off(t, d, b) + j];
        const float* cb = c_prev_.data() + row * h_n;
        for (int64_t j = 0; j < h_n; ++j) {
          // z_i and z_f hold P_i C and P_f C, z_o holds P_o C'.
          const Gates a = gates(zr, cb[j], j);
          const float zo = zr[h_n + j], o = sigmoid(clamp(zo));
          const float tc = std::tanh(a.cn);
          const float dz_o = dhb[j] * tc * o * (1.0f - o) * pass(zo);
          float dcn = dcb[j] + dhb[j] * o * (1.0f - tc * tc);
          if (pd) dcn += dz_o * pd[h_n + j];
          float di = dcn * a.g;
          const float df = dcn * cb[j];
          float dz_f = 0.0f;
          if (input_forget_)
            di -= df;
          else
            dz_f = df * a.f * (1.0f - a.f) * pass(zr[2 * h_n + j]);
          const float dz_i = di * a.i * (1.0f - a.i) * pass(zr[j]);
          const float dz_c = dcn * a.i * (1.0f - a.g * a.g) * pass(zr[3 * h_n + j]);
          float dc_before = dcn * a.f;
          if (pd) dc_before += dz_i * pd[j] + dz_f * pd[2 * h_n + j];
          dcb[j] = dc_before;
          zr[j] = dz_i;
          zr[h_n + j] = dz_o;
          zr[2 * h_n + j] = dz_f;
          zr[3 * h_n + j] = dz_c;
        }
      }
      // dH before the step = dz R for the entries inside their sequence.
      gemm(false, false, dm_.batch, h_n, g_n, z_.data() + dm_.x_row(t, 0) * g_n, ld, r(d), h_n,
           0.0f, dh_new_.data(), h_n);
      for (int64_t b = 0; b < dm_.batch; ++b)
        if (t < lens_[b])
          std::copy(dh_new_.data() + b * h_n, dh_new_.data() + (b + 1) * h_n, dh_.data() + b * h_n);
    }
    for (size_t k = 4; k <= 5; ++k) {
      if (!ctx_.has_out(k)) continue;
      const std::vector<float>& src = k == 4 ? dh_ : dc_;
      float* out = ctx_.out(k).data<float>();
      for (int64_t b = 0; b < dm_.batch; ++b)
        std::copy(src.data() + b * h_n, src.data() + (b + 1) * h_n, out + dm_.state_off(d, b));
    }
  }

  // The gradients that sum over all steps, from dz (rows, 4H).
  void weight_grads(int64_t d) {
    const int64_t h_n = dm_.hidden, g_n = 4 * h_n, rows = dm_.seq * dm_.batch;
    const float* x = ctx_.in(0).data<float>();  // (rows, I)
    if (ctx_.has_out(0))                        // dX (rows, I) += dz W
      gemm(false, false, rows, dm_.in, g_n, z_.data(), g_n, w(d), dm_.in, d == 0 ? 0.0f : 1.0f,
           ctx_.out(0).data<float>(), dm_.in);
    if (ctx_.has_out(1))  // dW (4H, I) = dz^T X
      gemm(true, false, g_n, dm_.in, rows, z_.data(), g_n, x, dm_.in, 0.0f,
           ctx_.out(1).data<float>() + d * g_n * dm_.in, dm_.in);
    if (ctx_.has_out(2))  // dR (4H, H) = dz^T H_prev
      gemm(true, false, g_n, h_n, rows, z_.data(), g_n, h_prev_.data(), h_n, 0.0f,
           ctx_.out(2).data<float>() + d * g_n * h_n, h_n);
    if (ctx_.has_out(3)) {  // dB (8H): Wb and Rb enter the gates alike
      std::vector<double> sum(static_cast<size_t>(g_n), 0.0);
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t j = 0; j < g_n; ++j) sum[j] += z_[row * g_n + j];
      float* db = ctx_.out(3).data<float>() + d * 2 * g_n;
      for (int64_t j = 0; j < g_n; ++j) db[j] = db[g_n + j] = static_cast<float>(sum[j]);
    }
  }

  KernelContext& ctx_;
  LstmDims dm_;
  std::string direction_;
  bool has_clip_ = false, input_forget_ = false;
  float clip_ = 0.0f;
  std::vector<int64_t> lens_;   // (batch)
  std::vector<float> z_;        // (rows, 4H): pre-activations, then dz
  std::vector<float> h_prev_;   // (rows, H): H before each step
  std::vector<float> c_prev_;   // (rows, H): C before each step
  std::vector<float> h_, c_;    // (batch, H): the running state
  std::vector<float> dh_, dc_;  // (batch, H): gradients of the state after a step
  std::vector<float> dh_new_;   // (batch, H)
};

void lstm_grad(KernelContext& ctx) {
  LstmGrad(ctx).run();
}

}  // namespace

CpuKernel kernel_LSTMGrad() {
  return {lstm_grad, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
