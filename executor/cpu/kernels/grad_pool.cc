// CPU kernels of MaxPoolGrad and AveragePoolGrad (f32). They walk the same
// windows as the forward kernels in pool.cc (pool_window.h), viewed as 3-D
// with missing leading spatial axes of size 1, one (n, c) plane and one output
// row at a time: for each tap of the window, the row's outputs that it reaches
// form one contiguous range (last_axis_ranges), so the inner loops are
// branch-free and vectorise. Every order is fixed: deterministic.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/cpu/kernels/pool_halving.h"
#include "executor/cpu/kernels/pool_window.h"
#include "executor/cpu/kernels/vec_math.h"
#include "ir/error.h"

namespace pipetrain::exec::cpu {

namespace {

using ir::Tensor;

/// One tap of a row of windows: where[o] takes offset `base + o * s` (in the
/// plane) when x there beats best[o], or when output o has no tap yet. Taps
/// come in scan order, so each window keeps its first maximum (and a NaN in
/// its first tap), exactly as MaxPool's Indices. kStride 0 means `stride`.
template <int64_t kStride>
void argmax_tap(float* best, int32_t* where, const float* xp, int64_t base, int64_t from,
                int64_t to, int64_t stride = 0) {
  // best, where: (OW); xp: the plane (D, H, W)
  const int64_t s = kStride ? kStride : stride;
  if (to <= from) return;
  const float* src = xp + base + from * s;  // affine loads vectorise, an indexed one would not
  const int32_t first = static_cast<int32_t>(base + from * s), s32 = static_cast<int32_t>(s);
  for (int64_t j = 0; j < to - from; ++j) {
    const int64_t o = from + j;
    const float v = src[j * s];
    const bool take = (v > best[o]) | (where[o] < 0);
    best[o] = select_f32(take, v, best[o]);
    const int32_t m = -static_cast<int32_t>(take);
    where[o] = ((first + static_cast<int32_t>(j) * s32) & m) | (where[o] & ~m);
  }
}

/// max_pool_grad over blocked dY, X and dX (blocked_layout.h): N * C / B
/// images of (H, W, B), each window's taps scanned over B contiguous channels
/// in the row-major kernel's order with its rule (the first maximum, a NaN in
/// the first tap), and each image's outputs adding into dX in order, so the
/// bits are the row-major kernel's.
void max_pool_grad_blocked(const Window3& p, const ir::Shape& xs, const float* dy, const float* x,
                           float* dx, int64_t b) {
  const std::array<AxisTaps, 3> taps = axis_taps(p);
  std::fill(dx, dx + ir::numel(xs), 0.0f);
  std::vector<float> best(static_cast<size_t>(b));
  std::vector<int64_t> where(static_cast<size_t>(b));  // input position, -1: none yet
  for (int64_t n = 0; n < xs[0] * xs[1] / b; ++n) {
    const float* xn = x + n * p.in_size() * b;
    const float* dyn = dy + n * p.out_size() * b;
    float* dxn = dx + n * p.in_size() * b;
    for_each_window(taps, [&](int64_t o, const int64_t* st, const int64_t* lo, const int64_t* hi) {
      std::fill(where.begin(), where.end(), -1);
      std::fill(best.begin(), best.end(), 0.0f);
      for (int64_t a = lo[0]; a < hi[0]; ++a)
        for (int64_t r = lo[1]; r < hi[1]; ++r) {
          const int64_t row = ((st[0] + a * p.d[0]) * p.in[1] + st[1] + r * p.d[1]) * p.in[2];
          for (int64_t c = lo[2]; c < hi[2]; ++c) {
            const int64_t pos = row + st[2] + c * p.d[2];
            const float* v = xn + pos * b;
            for (int64_t l = 0; l < b; ++l) {
              const bool take = (int{v[l] > best[l]} | int{where[l] < 0}) != 0;  // branch-free
              best[l] = take ? v[l] : best[l];
              where[l] = take ? pos : where[l];
            }
          }
        }
      const float* g = dyn + o * b;
      for (int64_t l = 0; l < b; ++l)
        if (where[l] >= 0) dxn[where[l] * b + l] += g[l];
    });
  }
}

/// max_pool_grad_blocked for blocks of a multiple of 8 channels (kB: 8, 16,
/// or 0 for `block`, nhwc's C) over `images`, each window's taps compared as
/// B / 8 vectors of eight channels (GCC vector extensions): the same scan
/// order and rule (the first tap always, a later one only when greater: ties
/// and NaN as there), and each image's outputs adding into dX in order, so
/// the same bits.
template <int64_t kB>
void max_pool_grad_blocked_vec(const Window3& p, const std::array<AxisTaps, 3>& taps,
                               int64_t images, const float* dy, const float* x, float* dx,
                               int64_t block = kB) {
  typedef float v8f __attribute__((vector_size(32)));
  typedef int32_t v8i __attribute__((vector_size(32)));
  const int64_t b = kB ? kB : block, kV = b / 8;
  // Registers for the fixed blocks, the heap for nhwc's C / 8 vectors.
  constexpr int64_t kFixed = kB ? kB / 8 : 1;
  std::vector<v8f> best_heap(kB ? 0 : static_cast<size_t>(kV));
  std::vector<v8i> where_heap(kB ? 0 : static_cast<size_t>(kV));
  std::fill(dx, dx + images * p.in_size() * b, 0.0f);
  for (int64_t n = 0; n < images; ++n) {
    const float* xn = x + n * p.in_size() * b;
    const float* dyn = dy + n * p.out_size() * b;
    float* dxn = dx + n * p.in_size() * b;
    for_each_window(taps, [&](int64_t o, const int64_t* st, const int64_t* lo, const int64_t* hi) {
      v8f best_fixed[kFixed];
      v8i where_fixed[kFixed];
      v8f* best = kB ? best_fixed : best_heap.data();
      v8i* where = kB ? where_fixed : where_heap.data();  // each channel's maximum's position
      bool first = true;
      for (int64_t a = lo[0]; a < hi[0]; ++a)
        for (int64_t r = lo[1]; r < hi[1]; ++r) {
          const int64_t row = ((st[0] + a * p.d[0]) * p.in[1] + st[1] + r * p.d[1]) * p.in[2];
          for (int64_t c = lo[2]; c < hi[2]; ++c) {
            const int64_t pos = row + st[2] + c * p.d[2];
            const v8i at = v8i{} + static_cast<int32_t>(pos);
            for (int64_t v = 0; v < kV; ++v) {
              v8f xv;
              __builtin_memcpy(&xv, xn + pos * b + v * 8, sizeof(xv));
              if (first) {
                best[v] = xv;
                where[v] = at;
              } else {
                const v8i take = xv > best[v];
                best[v] = take ? xv : best[v];
                where[v] = take ? at : where[v];
              }
            }
            first = false;
          }
        }
      if (first) return;  // a window of padding only routes nothing
      const float* g = dyn + o * b;
      for (int64_t v = 0; v < kV; ++v)
        for (int64_t l = 0; l < 8; ++l) dxn[where[v][l] * b + v * 8 + l] += g[v * 8 + l];
    });
  }
}

/// Eight channels of one halving window (taps v0..v3 in scan order; v2, v3
/// only when kRows = 2): the first maximum gets 0 + g, the other taps 0.
/// A tap wins when greater than the best before it and no later tap wins
/// (the first tap always, NaN and ties as the general kernel). GCC vector
/// extensions: the scalar form compiled to compares and branches per lane.
template <int64_t kRows>
void route_first_max8(const float* v0, const float* v1, const float* v2, const float* v3,
                      const float* g, float* d0, float* d1, float* d2, float* d3) {
  typedef float v8f __attribute__((vector_size(32)));
  typedef int32_t v8i __attribute__((vector_size(32)));
  v8f a, b, c, e, gv;
  __builtin_memcpy(&a, v0, sizeof(a));
  __builtin_memcpy(&b, v1, sizeof(b));
  __builtin_memcpy(&gv, g, sizeof(gv));
  const v8f zero = {}, routed = zero + gv;  // 0 + dY: -0 becomes +0, as the add into zeros
  const v8i t1 = b > a;
  v8i t2 = {}, t3 = {};
  if constexpr (kRows == 2) {
    __builtin_memcpy(&c, v2, sizeof(c));
    __builtin_memcpy(&e, v3, sizeof(e));
    const v8f best = t1 ? b : a;
    t2 = c > best;
    t3 = e > (t2 ? c : best);
  }
  const v8f r0 = (t1 | t2 | t3) ? zero : routed, r1 = (t1 & ~(t2 | t3)) ? routed : zero;
  __builtin_memcpy(d0, &r0, sizeof(r0));
  __builtin_memcpy(d1, &r1, sizeof(r1));
  if constexpr (kRows == 2) {
    const v8f r2 = (t2 & ~t3) ? routed : zero, r3 = t3 ? routed : zero;
    __builtin_memcpy(d2, &r2, sizeof(r2));
    __builtin_memcpy(d3, &r3, sizeof(r3));
  }
}

/// max_pool_grad_blocked for the halving windows (pool_halving.h: 1 or 2
/// rows by 2 columns, stride the window, no padding) over `images` of
/// (D, H, W, kB): a window's taps are kRows x 2 vectors of kB channels, and
/// per channel the first maximum in the general kernel's scan order (the
/// first tap always, a later one only when greater: ties and NaN as there)
/// gets 0 + dY, as the zero-filled dX's add gives, the other taps 0. Every
/// element of dX is written where the windows cover the input.
template <int64_t kRows, int64_t kB>
void max_pool_grad_blocked_halving(const Window3& p, int64_t images, const float* dy,
                                   const float* x, float* dx) {
  const int64_t w = p.in[2], ow = p.out[2];
  const bool covered = p.in[0] == p.out[0] && p.in[1] == kRows * p.out[1] && w == 2 * ow;
  if (!covered) std::fill(dx, dx + images * p.in_size() * kB, 0.0f);
  for (int64_t n = 0; n < images; ++n)
    for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < p.out[1]; ++o1)
        for (int64_t o = 0; o < ow; ++o) {
          const int64_t pos = ((n * p.in[0] + o0) * p.in[1] + o1 * kRows) * w + 2 * o;
          // The taps in scan order: (0, 0), (0, 1), then the second row's.
          const float* x0 = x + pos * kB;
          const float* x2 = x0 + (kRows - 1) * w * kB;
          float* d0 = dx + pos * kB;
          float* d2 = d0 + (kRows - 1) * w * kB;
          const float* g = dy + (((n * p.out[0] + o0) * p.out[1] + o1) * ow + o) * kB;  // (kB)
          for (int64_t l = 0; l < kB; l += 8)
            route_first_max8<kRows>(x0 + l, x0 + kB + l, x2 + l, x2 + kB + l, g + l, d0 + l,
                                    d0 + kB + l, d2 + l, d2 + kB + l);
        }
}

/// dX[argmax of window o] += dY[o].
void max_pool_grad(KernelContext& ctx) {
  const Tensor& dy = ctx.in(0);  // (N, C, O...)
  const Tensor& x = ctx.in(1);   // (N, C, D...)
  Tensor& dx = ctx.out(0);       // (N, C, D...), every element written
  const Window3 p = pool_geometry(ctx.n(), x.shape());
  if (ctx.in_blocked(1)) {  // and dY, dX (blocked_layout_access)
    const int64_t b = channel_block(x.shape()[1]);
    const int64_t rows = halving_window_rows(p), images = x.shape()[0] * x.shape()[1] / b;
    if ((b == 8 || b == 16) && rows != 0)  // images are independent: split over threads
      return parallel_for(
          images, x.numel() * 4,
          [&](int64_t begin, int64_t end) {
            const int64_t in = begin * p.in_size() * b, out = begin * p.out_size() * b;
            const float *dyb = dy.data<float>() + out, *xb = x.data<float>() + in;
            float* dxb = dx.data<float>() + in;
            if (b == 8 && rows == 2)
              max_pool_grad_blocked_halving<2, 8>(p, end - begin, dyb, xb, dxb);
            if (b == 8 && rows == 1)
              max_pool_grad_blocked_halving<1, 8>(p, end - begin, dyb, xb, dxb);
            if (b == 16 && rows == 2)
              max_pool_grad_blocked_halving<2, 16>(p, end - begin, dyb, xb, dxb);
            if (b == 16 && rows == 1)
              max_pool_grad_blocked_halving<1, 16>(p, end - begin, dyb, xb, dxb);
          },
          1);
    if (b % 8 == 0 && p.in_size() <= std::numeric_limits<int32_t>::max()) {
      const std::array<AxisTaps, 3> taps = axis_taps(p);
      return parallel_for(
          images, x.numel() * p.k[0] * p.k[1] * p.k[2],
          [&](int64_t begin, int64_t end) {
            const int64_t in = begin * p.in_size() * b, out = begin * p.out_size() * b;
            const float *dyb = dy.data<float>() + out, *xb = x.data<float>() + in;
            float* dxb = dx.data<float>() + in;
            if (b == 8)
              max_pool_grad_blocked_vec<8>(p, taps, end - begin, dyb, xb, dxb);
            else if (b == 16)
              max_pool_grad_blocked_vec<16>(p, taps, end - begin, dyb, xb, dxb);
            else
              max_pool_grad_blocked_vec<0>(p, taps, end - begin, dyb, xb, dxb, b);
          },
          1);
    }
    return max_pool_grad_blocked(p, x.shape(), dy.data<float>(), x.data<float>(), dx.data<float>(),
                                 b);
  }
  const int64_t planes = x.shape()[0] * x.shape()[1], ow = p.out[2];
  assert(dy.numel() == planes * p.out_size());
  // Planes are independent: split over threads (parallel_for).
  if (const int64_t rows = halving_window_rows(p); rows != 0)
    return parallel_for(
        planes, x.numel() * 4,
        [&](int64_t begin, int64_t end) {
          const float* dyb = dy.data<float>() + begin * p.out_size();
          const float* xb = x.data<float>() + begin * p.in_size();
          float* dxb = dx.data<float>() + begin * p.in_size();
          if (rows == 2)
            max_pool_grad_halving<2>(p, end - begin, dyb, xb, dxb);
          else
            max_pool_grad_halving<1>(p, end - begin, dyb, xb, dxb);
        },
        1);
  std::memset(dx.raw(), 0, dx.nbytes());  // the general path adds into dX
  if (p.in_size() > std::numeric_limits<int32_t>::max())
    throw UnsupportedOp(ctx.n().describe() + ": a plane of " + std::to_string(p.in_size()) +
                        " elements is too large for MaxPoolGrad (2^31 at most)");
  const std::array<AxisTaps, 3> taps = axis_taps(p);
  const LastAxisRanges r = last_axis_ranges(p);
  const int64_t work = x.numel() * 2 * p.k[0] * p.k[1] * p.k[2];
  parallel_for(
      planes, work,
      [&](int64_t pl_begin, int64_t pl_end) {
        std::vector<float> best(static_cast<size_t>(ow));     // (OW)
        std::vector<int32_t> where(static_cast<size_t>(ow));  // (OW) offset in the plane, -1: none
        for (int64_t pl = pl_begin; pl < pl_end; ++pl) {
          const float* xp = x.data<float>() + pl * p.in_size();     // (D, H, W)
          const float* dyp = dy.data<float>() + pl * p.out_size();  // (OD, OH, OW)
          float* dxp = dx.data<float>() + pl * p.in_size();         // (D, H, W)
          for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
            for (int64_t o1 = 0; o1 < p.out[1]; ++o1) {
              std::fill(where.begin(), where.end(), -1);
              std::fill(best.begin(), best.end(), 0.0f);
              for_each_input_row(p, taps, o0, o1, [&](int64_t row) {
                for (int64_t c = 0; c < p.k[2]; ++c) {
                  const int64_t base = row - p.pb[2] + c * p.d[2];
                  const int64_t from = r.first[static_cast<size_t>(c)];
                  const int64_t to = r.last[static_cast<size_t>(c)];
                  if (p.s[2] == 1)
                    argmax_tap<1>(best.data(), where.data(), xp, base, from, to);
                  else if (p.s[2] == 2)
                    argmax_tap<2>(best.data(), where.data(), xp, base, from, to);
                  else
                    argmax_tap<0>(best.data(), where.data(), xp, base, from, to, p.s[2]);
                }
              });
              const float* g = dyp + (o0 * p.out[1] + o1) * ow;  // (OW)
              for (int64_t o = 0; o < ow; ++o)
                if (where[static_cast<size_t>(o)] >= 0) dxp[where[static_cast<size_t>(o)]] += g[o];
            }
        }
      },
      1);
}

/// dxp[base + o * stride] += g[o] for o in [from, to); kStride 0 means `stride`.
template <int64_t kStride>
void spread_tap(float* dxp, int64_t base, const float* g, int64_t from, int64_t to,
                int64_t stride = 0) {
  // dxp: the plane (D, H, W); g: (OW)
  const int64_t s = kStride ? kStride : stride;
  if (to <= from) return;
  float* dst = dxp + base + from * s;
  for (int64_t j = 0; j < to - from; ++j) dst[j * s] += g[from + j];
}

/// Y[o] = sum of window o's taps / count[o], so every tap of window o gets
/// dY[o] / count[o] (count as the forward's: with or without the padding).
void average_pool_grad(KernelContext& ctx) {
  const Tensor& dy = ctx.in(0);  // (N, C, O...)
  Tensor& dx = ctx.out(0);       // (N, C, D...) = input_shape, zero-filled
  if (dx.rank() < 3)
    throw ModelError(ctx.n().describe() + ": input_shape " + ir::shape_str(dx.shape()) +
                     " is not (N, C, D...)");
  const bool include_pad = ctx.n().attr_int("count_include_pad", 0) != 0;
  const Window3 p = pool_geometry(ctx.n(), dx.shape());
  const std::array<AxisTaps, 3> taps = axis_taps(p);
  const LastAxisRanges r = last_axis_ranges(p);
  const int64_t planes = dx.shape()[0] * dx.shape()[1], ow = p.out[2];
  assert(dy.numel() == planes * p.out_size());
  // The divisor is a product of per-axis counts: count[i][o] along axis i.
  std::array<std::vector<int64_t>, 3> count;
  for (int i = 0; i < 3; ++i)
    for (size_t o = 0; o < taps[i].start.size(); ++o)
      count[i].push_back(average_pool_axis_count(p, i, taps[i].start[o], taps[i].lo[o],
                                                 taps[i].hi[o], include_pad));
  std::vector<float> g(static_cast<size_t>(ow));  // (OW) dY / count of one output row
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* dyp = dy.data<float>() + pl * p.out_size();  // (OD, OH, OW)
    float* dxp = dx.data<float>() + pl * p.in_size();         // (D, H, W)
    for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < p.out[1]; ++o1) {
        const int64_t rows = count[0][static_cast<size_t>(o0)] * count[1][static_cast<size_t>(o1)];
        const float* dyr = dyp + (o0 * p.out[1] + o1) * ow;  // (OW)
        for (int64_t o = 0; o < ow; ++o) {
          const int64_t n = rows * count[2][static_cast<size_t>(o)];
          g[static_cast<size_t>(o)] = n > 0 ? dyr[o] / static_cast<float>(n) : 0.0f;
        }
        for_each_input_row(p, taps, o0, o1, [&](int64_t row) {
          for (int64_t c = 0; c < p.k[2]; ++c) {
            const int64_t base = row - p.pb[2] + c * p.d[2];
            const int64_t from = r.first[static_cast<size_t>(c)];
            const int64_t to = r.last[static_cast<size_t>(c)];
            if (p.s[2] == 1)
              spread_tap<1>(dxp, base, g.data(), from, to);
            else if (p.s[2] == 2)
              spread_tap<2>(dxp, base, g.data(), from, to);
            else
              spread_tap<0>(dxp, base, g.data(), from, to, p.s[2]);
          }
        });
      }
  }
}

}  // namespace

CpuKernel kernel_MaxPoolGrad() {
  return {max_pool_grad, {ir::DType::kF32}, 0};
}
CpuKernel kernel_AveragePoolGrad() {
  return {average_pool_grad, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
