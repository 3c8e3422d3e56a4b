// Shared implementations of LSTM and LSTMGrad, step for step as the CPU
// kernels (rnn.cc, grad_rnn.cc) compute them: the input and recurrent
// projections go to the Exec's GEMM, each step's gate math is one functor
// call per (batch entry, unit). Batch entries past their sequence_lens keep
// their state and write zeros to Y; their dz is 0.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "executor/cpu/kernels/rnn_attrs.h"
#include "executor/device/ops_shape.h"

namespace pipetrain::exec::device {

struct LstmDims {
  int64_t seq = 0, batch = 0, in = 0, hidden = 0, dirs = 0;
  bool batch_major = false;  // layout 1
  PIPETRAIN_HD int64_t x_row(int64_t t, int64_t b) const {
    return batch_major ? b * seq + t : t * batch + b;
  }
  PIPETRAIN_HD int64_t row_step() const { return batch_major ? seq : 1; }
  PIPETRAIN_HD int64_t y_off(int64_t t, int64_t d, int64_t b) const {
    return (batch_major ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * hidden;
  }
  PIPETRAIN_HD int64_t state_off(int64_t d, int64_t b) const {
    return (batch_major ? b * dirs + d : d * batch + b) * hidden;
  }
};

/// Attributes and host-side setup common to LSTM and LSTMGrad.
struct LstmSetup {
  LstmDims dm;
  std::string direction;
  bool has_clip = false, input_forget = false;
  float clip = 0.0f;
  std::vector<int64_t> lens;  // (batch), clamped to [0, seq]

  bool reverse(int64_t d) const {
    return direction == "reverse" || (direction == "bidirectional" && d == 1);
  }
};

inline LstmSetup lstm_setup(const KernelContext& h) {
  const ir::Node& n = h.n();
  LstmSetup s;
  const ir::Shape& x = h.in(0).shape();
  s.dm.batch_major = n.attr_int("layout", 0) == 1;
  s.dm.seq = x[s.dm.batch_major ? 1 : 0];
  s.dm.batch = x[s.dm.batch_major ? 0 : 1];
  s.dm.in = x[2];
  s.dm.dirs = h.in(1).shape()[0];
  s.dm.hidden = h.in(2).shape()[2];
  s.direction = n.attr_string("direction", "forward");
  s.has_clip = n.has_attr("clip");
  s.clip = n.attr_float("clip", 0.0f);
  s.input_forget = n.attr_int("input_forget", 0) != 0;
  s.lens.assign(static_cast<size_t>(s.dm.batch), s.dm.seq);
  if (h.has_in(4))
    for (int64_t b = 0; b < s.dm.batch; ++b)
      s.lens[static_cast<size_t>(b)] =
          std::clamp<int64_t>(static_cast<int64_t>(h.in(4).at(b)), 0, s.dm.seq);
  return s;
}

/// The gate math both kernels share.
struct LstmMath {
  int64_t h_n;
  bool has_clip, input_forget;
  float clip;
  PIPETRAIN_HD static float sigmoid(float v) { return 1.0f / (1.0f + ::expf(-v)); }
  PIPETRAIN_HD float clamp(float v) const {
    return has_clip ? (v < -clip ? -clip : (clip < v ? clip : v)) : v;
  }
  /// d clamp(v) / dv: 1 inside [-clip, clip], 0 where clip cut it.
  PIPETRAIN_HD float pass(float v) const {
    return !has_clip || (v >= -clip && v <= clip) ? 1.0f : 0.0f;
  }
};

inline LstmMath lstm_math(const LstmSetup& s) {
  return {s.dm.hidden, s.has_clip, s.input_forget, s.clip};
}

/// bias (4H) = Wb + Rb of direction d (0 without B).
struct LstmBias {
  const float* b;  // (8H) of direction d, or null
  float* bias;
  int64_t g_n;
  PIPETRAIN_HD void operator()(int64_t j) const { bias[j] = b ? b[j] + b[g_n + j] : 0.0f; }
};

/// The running state (batch, H) from initial_h / initial_c (0 when absent).
struct LstmInitState {
  const float *h0, *c0;
  float *h, *c;
  LstmDims dm;
  int64_t d;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t b = i / dm.hidden, j = i - b * dm.hidden;
    h[i] = h0 ? h0[dm.state_off(d, b) + j] : 0.0f;
    c[i] = c0 ? c0[dm.state_off(d, b) + j] : 0.0f;
  }
};

/// gates (batch, 4H) = xproj rows of step t + bias.
struct LstmStepInput {
  const float *xproj, *bias;
  float* gates;
  LstmDims dm;
  int64_t t;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t g_n = 4 * dm.hidden, b = i / g_n, j = i - b * g_n;
    gates[i] = xproj[dm.x_row(t, b) * g_n + j] + bias[j];
  }
};

/// One step's cell update of unit (b, j) (rnn.cc's inner loop).
struct LstmCell {
  const float *gates, *p;  // p: (3H) peepholes of direction d, or null
  float *h, *c, *y;        // y may be null
  const int64_t* lens;
  LstmDims dm;
  LstmMath m;
  int64_t t, d;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t h_n = dm.hidden, b = i / h_n, j = i - b * h_n;
    if (t >= lens[b]) return;  // outside this sequence
    const float* gb = gates + b * 4 * h_n;
    float gi = gb[j], go = gb[h_n + j], gf = gb[2 * h_n + j], gc = gb[3 * h_n + j];
    const float cb = c[i];
    if (p) {
      gi += p[j] * cb;
      gf += p[2 * h_n + j] * cb;
    }
    const float in = LstmMath::sigmoid(m.clamp(gi));
    const float f = m.input_forget ? 1.0f - in : LstmMath::sigmoid(m.clamp(gf));
    const float cn = f * cb + in * ::tanhf(m.clamp(gc));
    if (p) go += p[h_n + j] * cn;
    const float o = LstmMath::sigmoid(m.clamp(go));
    c[i] = cn;
    h[i] = o * ::tanhf(cn);
    if (y) y[dm.y_off(t, d, b) + j] = h[i];
  }
};

/// Final state (batch, H) into Y_h / Y_c of direction d.
struct LstmFinalState {
  const float *h, *c;
  float *yh, *yc;  // may be null
  LstmDims dm;
  int64_t d;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t b = i / dm.hidden, j = i - b * dm.hidden;
    if (yh) yh[dm.state_off(d, b) + j] = h[i];
    if (yc) yc[dm.state_off(d, b) + j] = c[i];
  }
};

/// Row-major C (m, n) = op(A) op(B) + beta C; k = 0 gives beta C (as the CPU).
template <typename Exec>
void lstm_gemm(Exec& ex, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
               int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  ex.gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

template <typename Exec>
void lstm_op(Exec& ex, DeviceOpArgs& a) {
  const LstmSetup s = lstm_setup(*a.host);
  const LstmDims& dm = s.dm;
  const int64_t h_n = dm.hidden, g_n = 4 * h_n, rows = dm.seq * dm.batch;
  const LstmMath m = lstm_math(s);
  const int64_t* lens = ex.upload(s.lens);
  float* xproj = ex.template scratch<float>(rows * g_n);
  float* gates = ex.template scratch<float>(dm.batch * g_n);
  float* h = ex.template scratch<float>(dm.batch * h_n);
  float* c = ex.template scratch<float>(dm.batch * h_n);
  float* bias = ex.template scratch<float>(g_n);
  float* y = a.has_out(0) ? a.out[0].data<float>() : nullptr;
  for (int64_t d = 0; d < dm.dirs; ++d) {
    const float* w = a.in[1].data<float>() + d * g_n * dm.in;
    const float* r = a.in[2].data<float>() + d * g_n * h_n;
    const float* p = a.has_in(7) ? a.in[7].data<float>() + d * 3 * h_n : nullptr;
    ex.for_each(g_n,
                LstmBias{a.has_in(3) ? a.in[3].data<float>() + d * 2 * g_n : nullptr, bias, g_n});
    ex.for_each(dm.batch * h_n,
                LstmInitState{a.has_in(5) ? a.in[5].data<float>() : nullptr,
                              a.has_in(6) ? a.in[6].data<float>() : nullptr, h, c, dm, d});
    if (rows > 0 && dm.in > 0)
      lstm_gemm(ex, false, true, rows, g_n, dm.in, a.in[0].data<float>(), dm.in, w, dm.in, 0.0f,
                xproj, g_n);
    else
      ex.for_each(rows * g_n, Fill{xproj, 0.0f});
    for (int64_t st = 0; st < dm.seq; ++st) {
      const int64_t t = s.reverse(d) ? dm.seq - 1 - st : st;
      ex.for_each(dm.batch * g_n, LstmStepInput{xproj, bias, gates, dm, t});
      if (h_n > 0) lstm_gemm(ex, false, true, dm.batch, g_n, h_n, h, h_n, r, h_n, 1.0f, gates, g_n);
      ex.for_each(dm.batch * h_n, LstmCell{gates, p, h, c, y, lens, dm, m, t, d});
    }
    ex.for_each(dm.batch * h_n,
                LstmFinalState{h, c, a.has_out(1) ? a.out[1].data<float>() : nullptr,
                               a.has_out(2) ? a.out[2].data<float>() : nullptr, dm, d});
  }
}

// --- LSTMGrad ------------------------------------------------------------------

/// z (rows, 4H) += bias, before the steps.
struct AddRowBias {
  float* z;
  const float* bias;
  int64_t g_n;
  PIPETRAIN_HD void operator()(int64_t i) const { z[i] += bias[i % g_n]; }
};

/// The recomputed forward step of unit (b, j): keeps the states before the
/// step and z with the peephole terms added.
struct LstmRecompute {
  float *z, *h, *c, *h_prev, *c_prev;
  const float* p;
  const int64_t* lens;
  LstmDims dm;
  LstmMath m;
  int64_t t;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t h_n = dm.hidden, b = i / h_n, j = i - b * h_n, row = dm.x_row(t, b);
    h_prev[row * h_n + j] = h[i];
    c_prev[row * h_n + j] = c[i];
    if (t >= lens[b]) return;  // outside this sequence: the state stays
    float* zr = z + row * 4 * h_n;
    const float cb = c[i];
    if (p) {
      zr[j] += p[j] * cb;
      zr[2 * h_n + j] += p[2 * h_n + j] * cb;
    }
    const float in = LstmMath::sigmoid(m.clamp(zr[j]));
    const float f = m.input_forget ? 1.0f - in : LstmMath::sigmoid(m.clamp(zr[2 * h_n + j]));
    const float g = ::tanhf(m.clamp(zr[3 * h_n + j]));
    const float cn = f * cb + in * g;
    if (p) zr[h_n + j] += p[h_n + j] * cn;
    const float o = LstmMath::sigmoid(m.clamp(zr[h_n + j]));
    c[i] = cn;
    h[i] = o * ::tanhf(cn);
  }
};

/// dh, dc (batch, H) from dY_h / dY_c of direction d (0 when absent).
struct LstmInitGrad {
  const float *dy_h, *dy_c;
  float *dh, *dc;
  LstmDims dm;
  int64_t d;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t b = i / dm.hidden, j = i - b * dm.hidden;
    dh[i] = dy_h ? dy_h[dm.state_off(d, b) + j] : 0.0f;
    dc[i] = dy_c ? dy_c[dm.state_off(d, b) + j] : 0.0f;
  }
};

/// One backward step of unit (b, j) (grad_rnn.cc): z's row becomes dz.
struct LstmBackStep {
  float *z, *dh, *dc;
  const float *c_prev, *p, *dy;
  const int64_t* lens;
  LstmDims dm;
  LstmMath m;
  int64_t t, d;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t h_n = dm.hidden, b = i / h_n, j = i - b * h_n, row = dm.x_row(t, b);
    float* zr = z + row * 4 * h_n;
    if (t >= lens[b]) {
      zr[j] = zr[h_n + j] = zr[2 * h_n + j] = zr[3 * h_n + j] = 0.0f;
      return;
    }
    if (dy) dh[i] += dy[dm.y_off(t, d, b) + j];
    const float cb = c_prev[row * h_n + j];
    const float gi = LstmMath::sigmoid(m.clamp(zr[j]));
    const float gf = m.input_forget ? 1.0f - gi : LstmMath::sigmoid(m.clamp(zr[2 * h_n + j]));
    const float gg = ::tanhf(m.clamp(zr[3 * h_n + j]));
    const float cn = gf * cb + gi * gg;
    const float zo = zr[h_n + j], o = LstmMath::sigmoid(m.clamp(zo));
    const float tc = ::tanhf(cn);
    const float dz_o = dh[i] * tc * o * (1.0f - o) * m.pass(zo);
    float dcn = dc[i] + dh[i] * o * (1.0f - tc * tc);
    if (p) dcn += dz_o * p[h_n + j];
    float di = dcn * gg;
    const float df = dcn * cb;
    float dz_f = 0.0f;
    if (m.input_forget)
      di -= df;
    else
      dz_f = df * gf * (1.0f - gf) * m.pass(zr[2 * h_n + j]);
    const float dz_i = di * gi * (1.0f - gi) * m.pass(zr[j]);
    const float dz_c = dcn * gi * (1.0f - gg * gg) * m.pass(zr[3 * h_n + j]);
    float dc_before = dcn * gf;
    if (p) dc_before += dz_i * p[j] + dz_f * p[2 * h_n + j];
    dc[i] = dc_before;
    zr[j] = dz_i;
    zr[h_n + j] = dz_o;
    zr[2 * h_n + j] = dz_f;
    zr[3 * h_n + j] = dz_c;
  }
};

/// dh = dH of the step's entries inside their sequence.
struct LstmTakeDh {
  const float* dh_new;
  float* dh;
  const int64_t* lens;
  int64_t hidden, t;
  PIPETRAIN_HD void operator()(int64_t i) const {
    if (t < lens[i / hidden]) dh[i] = dh_new[i];
  }
};

/// dB of direction d: both halves get the column sums of dz, in double.
struct LstmBiasGrad {
  const float* z;
  float* db;  // (8H) of direction d
  int64_t rows, g_n;
  PIPETRAIN_HD void operator()(int64_t j) const {
    double sum = 0.0;
    for (int64_t row = 0; row < rows; ++row) sum += z[row * g_n + j];
    db[j] = db[g_n + j] = static_cast<float>(sum);
  }
};

template <typename Exec>
void lstm_grad_op(Exec& ex, DeviceOpArgs& a) {
  cpu::check_lstm_grad_attrs(a.n());
  const LstmSetup s = lstm_setup(*a.host);
  const LstmDims& dm = s.dm;
  const int64_t h_n = dm.hidden, g_n = 4 * h_n, rows = dm.seq * dm.batch, ld = dm.row_step() * g_n;
  const LstmMath m = lstm_math(s);
  const int64_t* lens = ex.upload(s.lens);
  float* z = ex.template scratch<float>(rows * g_n);
  float* h_prev = ex.template scratch<float>(rows * h_n);
  float* c_prev = ex.template scratch<float>(rows * h_n);
  float* h = ex.template scratch<float>(dm.batch * h_n);
  float* c = ex.template scratch<float>(dm.batch * h_n);
  float* dh = ex.template scratch<float>(dm.batch * h_n);
  float* dc = ex.template scratch<float>(dm.batch * h_n);
  float* dh_new = ex.template scratch<float>(dm.batch * h_n);
  float* bias = ex.template scratch<float>(g_n);
  auto in_or_null = [&](size_t i) { return a.has_in(i) ? a.in[i].data<float>() : nullptr; };
  const float* x = a.in[0].data<float>();
  for (int64_t d = 0; d < dm.dirs; ++d) {
    const float* w = a.in[1].data<float>() + d * g_n * dm.in;
    const float* r = a.in[2].data<float>() + d * g_n * h_n;
    const float* p = a.has_in(7) ? a.in[7].data<float>() + d * 3 * h_n : nullptr;
    // The forward, recomputed.
    ex.for_each(g_n,
                LstmBias{a.has_in(3) ? a.in[3].data<float>() + d * 2 * g_n : nullptr, bias, g_n});
    ex.for_each(dm.batch * h_n, LstmInitState{in_or_null(5), in_or_null(6), h, c, dm, d});
    if (dm.in > 0)
      lstm_gemm(ex, false, true, rows, g_n, dm.in, x, dm.in, w, dm.in, 0.0f, z, g_n);
    else
      ex.for_each(rows * g_n, Fill{z, 0.0f});
    ex.for_each(rows * g_n, AddRowBias{z, bias, g_n});
    for (int64_t st = 0; st < dm.seq; ++st) {
      const int64_t t = s.reverse(d) ? dm.seq - 1 - st : st;
      if (h_n > 0)
        lstm_gemm(ex, false, true, dm.batch, g_n, h_n, h, h_n, r, h_n, 1.0f,
                  z + dm.x_row(t, 0) * g_n, ld);
      ex.for_each(dm.batch * h_n, LstmRecompute{z, h, c, h_prev, c_prev, p, lens, dm, m, t});
    }
    // Backwards through the steps; z becomes dz.
    ex.for_each(dm.batch * h_n, LstmInitGrad{in_or_null(9), in_or_null(10), dh, dc, dm, d});
    for (int64_t st = dm.seq; st-- > 0;) {
      const int64_t t = s.reverse(d) ? dm.seq - 1 - st : st;
      ex.for_each(dm.batch * h_n,
                  LstmBackStep{z, dh, dc, c_prev, p, in_or_null(8), lens, dm, m, t, d});
      if (g_n > 0) {
        lstm_gemm(ex, false, false, dm.batch, h_n, g_n, z + dm.x_row(t, 0) * g_n, ld, r, h_n, 0.0f,
                  dh_new, h_n);
        ex.for_each(dm.batch * h_n, LstmTakeDh{dh_new, dh, lens, h_n, t});
      }
    }
    ex.for_each(dm.batch * h_n,
                LstmFinalState{dh, dc, a.has_out(4) ? a.out[4].data<float>() : nullptr,
                               a.has_out(5) ? a.out[5].data<float>() : nullptr, dm, d});
    // The gradients summed over all steps.
    if (a.has_out(0))
      lstm_gemm(ex, false, false, rows, dm.in, g_n, z, g_n, w, dm.in, d == 0 ? 0.0f : 1.0f,
                a.out[0].data<float>(), dm.in);
    if (a.has_out(1))
      lstm_gemm(ex, true, false, g_n, dm.in, rows, z, g_n, x, dm.in, 0.0f,
                a.out[1].data<float>() + d * g_n * dm.in, dm.in);
    if (a.has_out(2))
      lstm_gemm(ex, true, false, g_n, h_n, rows, z, g_n, h_prev, h_n, 0.0f,
                a.out[2].data<float>() + d * g_n * h_n, h_n);
    if (a.has_out(3))
      ex.for_each(g_n, LstmBiasGrad{z, a.out[3].data<float>() + d * 2 * g_n, rows, g_n});
  }
}

}  // namespace pipetrain::exec::device
