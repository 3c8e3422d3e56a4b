// LSTM (f32): per direction, one sgemm projects the inputs of all steps,
// then each step adds H R^T with one more sgemm and applies the gates (math
// in ir/ops/rnn.cc). Batch entries past their sequence_lens keep their state
// and write zeros to Y.
#include <algorithm>
#include <cmath>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/sgemm.h"

namespace pipetrain::exec::cpu {

namespace {

float sigmoid(float v) {
  return 1.0f / (1.0f + std::exp(-v));
}

struct LstmDims {
  int64_t seq, batch, in, hidden, dirs;
  bool batch_major;  // layout 1
  // Offsets (in elements) of X's, Y's and the state tensors' rows.
  int64_t x_row(int64_t t, int64_t b) const { return batch_major ? b * seq + t : t * batch + b; }
  int64_t y_off(int64_t t, int64_t d, int64_t b) const {
    return (batch_major ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * hidden;
  }
  int64_t state_off(int64_t d, int64_t b) const {
    return (batch_major ? b * dirs + d : d * batch + b) * hidden;
  }
};

void lstm(KernelContext& ctx) {
  const ir::Node& n = ctx.n();
  const ir::Tensor& x = ctx.in(0);
  LstmDims dm;
  dm.batch_major = n.attr_int("layout", 0) == 1;
  dm.seq = x.shape()[dm.batch_major ? 1 : 0];
  dm.batch = x.shape()[dm.batch_major ? 0 : 1];
  dm.in = x.shape()[2];
  dm.dirs = ctx.in(1).shape()[0];
  dm.hidden = ctx.in(2).shape()[2];
  const int64_t h_n = dm.hidden, g_n = 4 * dm.hidden;  // gate row length
  const std::string direction = n.attr_string("direction", "forward");
  const bool has_clip = n.has_attr("clip");
  const float clip = n.attr_float("clip", 0.0f);
  const bool input_forget = n.attr_int("input_forget", 0) != 0;
  auto clamp = [&](float v) { return has_clip ? std::clamp(v, -clip, clip) : v; };

  std::vector<int64_t> lens(static_cast<size_t>(dm.batch), dm.seq);
  if (ctx.has_in(4))
    for (int64_t b = 0; b < dm.batch; ++b)
      lens[static_cast<size_t>(b)] =
          std::clamp<int64_t>(static_cast<int64_t>(ctx.in(4).at(b)), 0, dm.seq);

  // All rows of X in storage order: (T * batch, I) for either layout.
  std::vector<float> xproj(static_cast<size_t>(dm.seq * dm.batch * g_n));  // (rows, 4H)
  std::vector<float> gates(static_cast<size_t>(dm.batch * g_n));           // (batch, 4H)
  std::vector<float> h(static_cast<size_t>(dm.batch * h_n));               // (batch, H)
  std::vector<float> c(static_cast<size_t>(dm.batch * h_n));               // (batch, H)
  std::vector<float> bias(static_cast<size_t>(g_n));                       // Wb + Rb
  float* y = ctx.has_out(0) ? ctx.out(0).data<float>() : nullptr;

  for (int64_t d = 0; d < dm.dirs; ++d) {
    bool reverse = direction == "reverse" || (direction == "bidirectional" && d == 1);
    const float* w = ctx.in(1).data<float>() + d * g_n * dm.in;                        // (4H, I)
    const float* r = ctx.in(2).data<float>() + d * g_n * h_n;                          // (4H, H)
    const float* p = ctx.has_in(7) ? ctx.in(7).data<float>() + d * 3 * h_n : nullptr;  // (3H)
    std::fill(bias.begin(), bias.end(), 0.0f);
    if (ctx.has_in(3)) {
      const float* bd = ctx.in(3).data<float>() + d * 2 * g_n;  // (8H): Wb then Rb
      for (int64_t j = 0; j < g_n; ++j) bias[static_cast<size_t>(j)] = bd[j] + bd[g_n + j];
    }
    for (int64_t b = 0; b < dm.batch; ++b)
      for (int64_t j = 0; j < h_n; ++j) {
        size_t k = static_cast<size_t>(b * h_n + j);
        h[k] = ctx.has_in(5) ? ctx.in(5).data<float>()[dm.state_off(d, b) + j] : 0.0f;
        c[k] = ctx.has_in(6) ? ctx.in(6).data<float>()[dm.state_off(d, b) + j] : 0.0f;
      }
    if (dm.seq * dm.batch > 0 && dm.in > 0)
      blas_sgemm(false, true, dm.seq * dm.batch, g_n, dm.in, 1.0f, x.data<float>(), dm.in, w, dm.in,
                 0.0f, xproj.data(), g_n);
    for (int64_t s = 0; s < dm.seq; ++s) {
      int64_t t = reverse ? dm.seq - 1 - s : s;
      for (int64_t b = 0; b < dm.batch; ++b) {
        const float* xp = xproj.data() + dm.x_row(t, b) * g_n;
        float* gb = gates.data() + b * g_n;
        for (int64_t j = 0; j < g_n; ++j) gb[j] = xp[j] + bias[static_cast<size_t>(j)];
      }
      if (h_n > 0)
        blas_sgemm(false, true, dm.batch, g_n, h_n, 1.0f, h.data(), h_n, r, h_n, 1.0f, gates.data(),
                   g_n);
      for (int64_t b = 0; b < dm.batch; ++b) {
        if (t >= lens[static_cast<size_t>(b)]) continue;  // outside this sequence
        const float* gb = gates.data() + b * g_n;         // i, o, f, c blocks of H
        float* hb = h.data() + b * h_n;
        float* cb = c.data() + b * h_n;
        for (int64_t j = 0; j < h_n; ++j) {
          float gi = gb[j], go = gb[h_n + j], gf = gb[2 * h_n + j], gc = gb[3 * h_n + j];
          if (p) {
            gi += p[j] * cb[j];
            gf += p[2 * h_n + j] * cb[j];
          }
          float i = sigmoid(clamp(gi));
          float f = input_forget ? 1.0f - i : sigmoid(clamp(gf));
          float cn = f * cb[j] + i * std::tanh(clamp(gc));
          if (p) go += p[h_n + j] * cn;
          float o = sigmoid(clamp(go));
          cb[j] = cn;
          hb[j] = o * std::tanh(cn);
        }
        if (y) std::copy(hb, hb + h_n, y + dm.y_off(t, d, b));
      }
    }
    for (int64_t b = 0; b < dm.batch; ++b) {
      const float* hb = h.data() + b * h_n;
      const float* cb = c.data() + b * h_n;
      if (ctx.has_out(1)) std::copy(hb, hb + h_n, ctx.out(1).data<float>() + dm.state_off(d, b));
      if (ctx.has_out(2)) std::copy(cb, cb + h_n, ctx.out(2).data<float>() + dm.state_off(d, b));
    }
  }
}

}  // namespace

CpuKernel kernel_LSTM() {
  return {lstm, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
