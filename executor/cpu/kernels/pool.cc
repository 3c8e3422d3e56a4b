// MaxPool, AveragePool and GlobalAveragePool (f32), plain loops. Every
// windowed pool is viewed as 3-D: missing leading spatial axes have size 1.
#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/cpu/kernels/pool_halving.h"
#include "executor/cpu/kernels/pool_window.h"

namespace pipetrain::exec::cpu {

namespace {

// acc[o] = max(acc[o], src[o * stride]) for o in [from, to); kStride 0 means
// the runtime `stride`.
template <int64_t kStride>
void running_max(float* acc, const float* src, int64_t from, int64_t to, int64_t stride = 0) {
  const int64_t s = kStride ? kStride : stride;
  for (int64_t o = from; o < to; ++o) acc[o] = std::max(acc[o], src[o * s]);
}

// Values only, one output row at a time (last_axis_ranges): the innermost
// loop is a branch-free running max over contiguous outputs.
void max_pool_plane(const Window3& p, const std::array<AxisTaps, 3>& t, const float* xp,
                    float* yp) {  // xp (D, H, W), yp (OD, OH, OW)
  const int64_t ow = p.out[2];
  const LastAxisRanges r = last_axis_ranges(p);
  for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
    for (int64_t o1 = 0; o1 < p.out[1]; ++o1) {
      float* acc = yp + (o0 * p.out[1] + o1) * ow;
      std::fill(acc, acc + ow, -std::numeric_limits<float>::infinity());
      for_each_input_row(p, t, o0, o1, [&](int64_t row) {
        for (int64_t c = 0; c < p.k[2]; ++c) {
          const float* src = xp + row - p.pb[2] + c * p.d[2];
          const int64_t from = r.first[static_cast<size_t>(c)], to = r.last[static_cast<size_t>(c)];
          // Constant strides let the compiler vectorise the strided loads.
          if (p.s[2] == 1)
            running_max<1>(acc, src, from, to);
          else if (p.s[2] == 2)
            running_max<2>(acc, src, from, to);
          else
            running_max<0>(acc, src, from, to, p.s[2]);
        }
      });
    }
}

// x and y blocked (blocked_layout.h): N * C / B images of (H, W, B), so the
// running max runs over B contiguous channels. Max is exact: this equals the
// plain path bit for bit.
void max_pool_blocked(const Window3& p, const std::array<AxisTaps, 3>& taps, const ir::Shape& xs,
                      const float* x, float* y) {
  const int64_t channels = channel_block(xs[1]);
  // Images are independent: split over threads (parallel_for).
  parallel_for(
      xs[0] * xs[1] / channels, ir::numel(xs) * p.k[0] * p.k[1] * p.k[2],
      [&](int64_t n_begin, int64_t n_end) {
        for (int64_t n = n_begin; n < n_end; ++n) {
          const float* xn = x + n * p.in_size() * channels;
          float* yn = y + n * p.out_size() * channels;
          for_each_window(taps, [&](int64_t o, const int64_t* st, const int64_t* lo,
                                    const int64_t* hi) {
            float* acc = yn + o * channels;
            std::fill(acc, acc + channels, -std::numeric_limits<float>::infinity());
            for (int64_t a = lo[0]; a < hi[0]; ++a)
              for (int64_t b = lo[1]; b < hi[1]; ++b) {
                const int64_t row = ((st[0] + a * p.d[0]) * p.in[1] + st[1] + b * p.d[1]) * p.in[2];
                for (int64_t c = lo[2]; c < hi[2]; ++c)
                  running_max<1>(acc, xn + (row + st[2] + c * p.d[2]) * channels, 0, channels);
              }
          });
        }
      },
      1);
}

/// max_pool_blocked for the halving windows (pool_halving.h: 1 or 2 rows by 2
/// columns, stride the window, no padding) over `images` of (D, H, W, kB): a
/// window's taps are kRows x 2 vectors of kB channels, folded from -inf in the
/// general kernel's scan order with std::max's rule per lane (a NaN tap is
/// skipped, the first of equal taps kept), so its bits. GCC vector extensions,
/// as grad_pool.cc's route_first_max8: the general kernel spent a window's
/// time in its tap bookkeeping.
template <int64_t kRows, int64_t kB>
void max_pool_blocked_halving(const Window3& p, int64_t images, const float* x, float* y) {
  typedef float v8f __attribute__((vector_size(32)));
  const v8f ninf = v8f{} - std::numeric_limits<float>::infinity();
  auto max8 = [](v8f a, v8f b) -> v8f { return a < b ? b : a; };  // std::max(a, b)
  auto at = [](const float* f) {
    v8f v;
    __builtin_memcpy(&v, f, sizeof(v));
    return v;
  };
  const int64_t w = p.in[2], ow = p.out[2];
  for (int64_t n = 0; n < images; ++n)
    for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < p.out[1]; ++o1)
        for (int64_t o = 0; o < ow; ++o) {
          // The taps in scan order: (0, 0), (0, 1), then the second row's.
          const float* x0 = x + (((n * p.in[0] + o0) * p.in[1] + o1 * kRows) * w + 2 * o) * kB;
          const float* x2 = x0 + (kRows - 1) * w * kB;
          float* yo = y + (((n * p.out[0] + o0) * p.out[1] + o1) * ow + o) * kB;
          for (int64_t l = 0; l < kB; l += 8) {
            v8f m = max8(max8(ninf, at(x0 + l)), at(x0 + kB + l));
            if constexpr (kRows == 2) m = max8(max8(m, at(x2 + l)), at(x2 + kB + l));
            __builtin_memcpy(yo + l, &m, sizeof(m));
          }
        }
}

void max_pool(KernelContext& ctx) {
  const ir::Tensor& x = ctx.in(0);  // (N, C, D...)
  ir::Tensor& y = ctx.out(0);       // (N, C, O...)
  if (ctx.in_blocked(0)) {          // no Indices (blocked_layout_access)
    Window3 p = pool_geometry(ctx.n(), x.shape());
    const int64_t b = channel_block(x.shape()[1]);
    const int64_t rows = halving_window_rows(p), images = x.shape()[0] * x.shape()[1] / b;
    if ((b == 8 || b == 16) && rows != 0)  // images are independent: split over threads
      return parallel_for(
          images, x.numel() * 2,
          [&](int64_t begin, int64_t end) {
            const float* xb = x.data<float>() + begin * p.in_size() * b;
            float* yb = y.data<float>() + begin * p.out_size() * b;
            if (b == 8 && rows == 2) max_pool_blocked_halving<2, 8>(p, end - begin, xb, yb);
            if (b == 8 && rows == 1) max_pool_blocked_halving<1, 8>(p, end - begin, xb, yb);
            if (b == 16 && rows == 2) max_pool_blocked_halving<2, 16>(p, end - begin, xb, yb);
            if (b == 16 && rows == 1) max_pool_blocked_halving<1, 16>(p, end - begin, xb, yb);
          },
          1);
    return max_pool_blocked(p, axis_taps(p), x.shape(), x.data<float>(), y.data<float>());
  }
  int64_t* idx = ctx.has_out(1) ? ctx.out(1).data<int64_t>() : nullptr;  // as y
  bool col_major = ctx.n().attr_int("storage_order", 0) != 0;
  Window3 p = pool_geometry(ctx.n(), x.shape());
  const int64_t halving_rows = idx ? 0 : halving_window_rows(p);
  const int64_t planes = x.shape()[0] * x.shape()[1];
  // Planes are independent: split over threads (parallel_for).
  const int64_t work = x.numel() * 2;
  if (halving_rows != 0)
    return parallel_for(
        planes, work,
        [&](int64_t begin, int64_t end) {
          const float* xb = x.data<float>() + begin * p.in_size();
          float* yb = y.data<float>() + begin * p.out_size();
          if (halving_rows == 2)
            max_pool_halving<2>(p, end - begin, xb, yb);
          else
            max_pool_halving<1>(p, end - begin, xb, yb);
        },
        1);
  std::array<AxisTaps, 3> taps = axis_taps(p);
  parallel_for(
      planes, work * p.k[0] * p.k[1] * p.k[2],
      [&](int64_t pl_begin, int64_t pl_end) {
        for (int64_t pl = pl_begin; pl < pl_end; ++pl) {
          const float* xp = x.data<float>() + pl * p.in_size();
          float* yp = y.data<float>() + pl * p.out_size();
          if (!idx) {
            max_pool_plane(p, taps, xp, yp);
            continue;
          }
          for_each_window(taps,
                          [&](int64_t o, const int64_t* st, const int64_t* lo, const int64_t* hi) {
                            float best = -std::numeric_limits<float>::infinity();
                            int64_t where = -1;  // row-major spatial offset of the maximum
                            for (int64_t a = lo[0]; a < hi[0]; ++a) {
                              int64_t i0 = st[0] + a * p.d[0];
                              for (int64_t b = lo[1]; b < hi[1]; ++b) {
                                int64_t i1 = st[1] + b * p.d[1];
                                const float* row = xp + (i0 * p.in[1] + i1) * p.in[2];
                                for (int64_t c = lo[2]; c < hi[2]; ++c) {
                                  int64_t i2 = st[2] + c * p.d[2];
                                  if (row[i2] > best || where < 0) {
                                    best = row[i2];
                                    where = (i0 * p.in[1] + i1) * p.in[2] + i2;
                                  }
                                }
                              }
                            }
                            yp[o] = best;
                            {
                              int64_t flat = where;
                              if (col_major && where >= 0) {
                                int64_t i2 = where % p.in[2], i1 = (where / p.in[2]) % p.in[1],
                                        i0 = where / (p.in[1] * p.in[2]);
                                flat = i0 + i1 * p.in[0] + i2 * p.in[0] * p.in[1];
                              }
                              idx[pl * p.out_size() + o] = pl * p.in_size() + flat;
                            }
                          });
        }
      },
      1);
}

void average_pool(KernelContext& ctx) {
  const ir::Tensor& x = ctx.in(0);  // (N, C, D...)
  ir::Tensor& y = ctx.out(0);       // (N, C, O...)
  bool include_pad = ctx.n().attr_int("count_include_pad", 0) != 0;
  Window3 p = pool_geometry(ctx.n(), x.shape());
  std::array<AxisTaps, 3> taps = axis_taps(p);
  int64_t planes = x.shape()[0] * x.shape()[1];
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* xp = x.data<float>() + pl * p.in_size();
    float* yp = y.data<float>() + pl * p.out_size();
    for_each_window(taps, [&](int64_t o, const int64_t* st, const int64_t* lo, const int64_t* hi) {
      double sum = 0;
      for (int64_t a = lo[0]; a < hi[0]; ++a) {
        int64_t i0 = st[0] + a * p.d[0];
        for (int64_t b = lo[1]; b < hi[1]; ++b) {
          const float* row = xp + (i0 * p.in[1] + st[1] + b * p.d[1]) * p.in[2];
          for (int64_t c = lo[2]; c < hi[2]; ++c) sum += row[st[2] + c * p.d[2]];
        }
      }
      const int64_t count = average_pool_count(p, st, lo, hi, include_pad);
      yp[o] = count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
    });
  }
}

void global_average_pool(KernelContext& ctx) {
  const ir::Tensor& x = ctx.in(0);  // (N, C, D...)
  ir::Tensor& y = ctx.out(0);       // (N, C, 1...)
  int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t size = planes == 0 ? 0 : x.numel() / planes;
  if (ctx.in_blocked(0)) {
    // x as N * C / B images of (H, W, B): the same sums in the same order per
    // channel, so the same bits; y (N, C, 1, 1) is the same bytes in either layout.
    const int64_t channels = channel_block(x.shape()[1]);
    std::vector<double> sum(static_cast<size_t>(channels));
    for (int64_t n = 0; n < planes / channels; ++n) {
      const float* xn = x.data<float>() + n * size * channels;
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t i = 0; i < size; ++i)
        for (int64_t c = 0; c < channels; ++c) sum[static_cast<size_t>(c)] += xn[i * channels + c];
      for (int64_t c = 0; c < channels; ++c)
        y.data<float>()[n * channels + c] =
            size > 0 ? static_cast<float>(sum[static_cast<size_t>(c)] / static_cast<double>(size))
                     : 0.0f;
    }
    return;
  }
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* xp = x.data<float>() + pl * size;
    double sum = 0;
    for (int64_t i = 0; i < size; ++i) sum += xp[i];
    y.data<float>()[pl] = size > 0 ? static_cast<float>(sum / static_cast<double>(size)) : 0.0f;
  }
}

}  // namespace

CpuKernel kernel_MaxPool() {
  return {max_pool, {ir::DType::kF32}, 0};
}
CpuKernel kernel_AveragePool() {
  return {average_pool, {ir::DType::kF32}, 0};
}
CpuKernel kernel_GlobalAveragePool() {
  return {global_average_pool, {ir::DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
