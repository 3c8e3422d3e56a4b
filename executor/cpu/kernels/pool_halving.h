// MaxPool and MaxPoolGrad for the CNNs' common window: 2 wide (and 1 or 2
// high), stride equal to the window, no padding, no dilation, every window
// inside the input. The general kernels (pool.cc, grad_pool.cc) walk each
// output row through per-tap ranges; at LeNet's 14 outputs a row that
// bookkeeping costs more than the maxima. Here a row's windows are read as
// pairs of adjacent floats in one loop. The taps are visited in the general
// kernels' scan order, so the results are theirs bit for bit (NaN, ties and
// signed zeros included).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "executor/cpu/kernels/vec_math.h"
#include "executor/cpu/kernels/window3.h"

namespace pipetrain::exec::cpu {

/// Rows of input per window (1 or 2) when `p` is such a window, else 0.
inline int64_t halving_window_rows(const Window3& p) {
  for (int i = 0; i < 3; ++i)
    if (p.k[i] != p.s[i] || p.d[i] != 1 || p.pb[i] != 0 || p.out[i] * p.k[i] > p.in[i]) return 0;
  if (p.k[0] != 1 || p.k[2] != 2 || (p.k[1] != 1 && p.k[1] != 2)) return 0;
  return p.k[1];
}

/// y (planes, OD, OH, OW) = the window maxima of x (planes, D, H, W), as the
/// general kernel's running max from -inf in scan order.
template <int64_t kRows>
void max_pool_halving(const Window3& p, int64_t planes, const float* x, float* y) {
  const int64_t ow = p.out[2], w = p.in[2];
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < p.out[1]; ++o1) {
        const float* r0 = x + (pl * p.in[0] + o0) * p.in[1] * w + o1 * kRows * w;
        const float* r1 = r0 + (kRows - 1) * w;
        float* yr = y + ((pl * p.out[0] + o0) * p.out[1] + o1) * ow;
        for (int64_t o = 0; o < ow; ++o) {
          float m = std::max(-std::numeric_limits<float>::infinity(), r0[2 * o]);
          m = std::max(m, r0[2 * o + 1]);
          if (kRows == 2) m = std::max(std::max(m, r1[2 * o]), r1[2 * o + 1]);
          yr[o] = m;
        }
      }
}

/// Eight windows of max_pool_grad_halving: x rows r0, r1 (16 floats each),
/// dy g (8), dx rows e0, e1 (16 each). A constant trip count keeps the whole
/// block in vector registers; a row of fewer windows goes through a padded copy.
template <int64_t kRows>
inline void max_pool_grad_block8(const float* r0, const float* r1, const float* g, float* e0,
                                 float* e1) {
  for (int64_t o = 0; o < 8; ++o) {
    float best = r0[2 * o];
    const bool tb = r0[2 * o + 1] > best;
    best = select_f32(tb, r0[2 * o + 1], best);
    bool tc = false, td = false;
    if (kRows == 2) {
      tc = r1[2 * o] > best;
      best = select_f32(tc, r1[2 * o], best);
      td = r1[2 * o + 1] > best;
    }
    const float v = 0.0f + g[o];
    // The last tap that beat its predecessors wins.
    e0[2 * o] = select_f32(!(tb | tc | td), v, 0.0f);
    e0[2 * o + 1] = select_f32(tb & !(tc | td), v, 0.0f);
    if (kRows == 2) {
      e1[2 * o] = select_f32(tc & !td, v, 0.0f);
      e1[2 * o + 1] = select_f32(td, v, 0.0f);
    }
  }
}

/// dx (planes, D, H, W) = dy routed to each window's first maximum (the
/// general kernel's rule: the first tap, then any tap greater than the best
/// so far), every element of dx written. The routed value is 0 + dy, as the
/// general kernel's add into a zero-filled dx (-0 becomes +0).
template <int64_t kRows>
void max_pool_grad_halving(const Window3& p, int64_t planes, const float* dy, const float* x,
                           float* dx) {
  const int64_t ow = p.out[2], w = p.in[2];
  const bool covered = p.in[0] == p.out[0] && p.in[1] == kRows * p.out[1] && w == 2 * ow;
  if (!covered) std::memset(dx, 0, static_cast<size_t>(planes * p.in_size()) * sizeof(float));
  float in0[16] = {}, in1[16] = {}, tail_g[8] = {}, out0[16], out1[16];
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < p.out[1]; ++o1) {
        const int64_t row = (pl * p.in[0] + o0) * p.in[1] * w + o1 * kRows * w;
        const float* r0 = x + row;
        const float* r1 = r0 + (kRows - 1) * w;
        float* d0 = dx + row;
        float* d1 = d0 + (kRows - 1) * w;
        const float* g = dy + ((pl * p.out[0] + o0) * p.out[1] + o1) * ow;
        int64_t o = 0;
        for (; o + 8 <= ow; o += 8)
          max_pool_grad_block8<kRows>(r0 + 2 * o, r1 + 2 * o, g + o, d0 + 2 * o, d1 + 2 * o);
        if (o == ow) continue;
        if (ow >= 8) {  // the last eight again: the overlap is rewritten with the same values
          o = ow - 8;
          max_pool_grad_block8<kRows>(r0 + 2 * o, r1 + 2 * o, g + o, d0 + 2 * o, d1 + 2 * o);
          continue;
        }
        const size_t n = static_cast<size_t>(ow - o);
        std::memcpy(in0, r0 + 2 * o, 2 * n * sizeof(float));
        std::memcpy(in1, r1 + 2 * o, 2 * n * sizeof(float));
        std::memcpy(tail_g, g + o, n * sizeof(float));
        max_pool_grad_block8<kRows>(in0, in1, tail_g, out0, out1);
        std::memcpy(d0 + 2 * o, out0, 2 * n * sizeof(float));
        if (kRows == 2) std::memcpy(d1 + 2 * o, out1, 2 * n * sizeof(float));
      }
}

}  // namespace pipetrain::exec::cpu
