// MaxPool, AveragePool and GlobalAveragePool (f32), plain loops. Every
// windowed pool is viewed as 3-D: missing leading spatial axes have size 1.
#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/window3.h"
#include "ir/ops/window.h"

namespace pipetrain::exec::cpu {

namespace {

Window3 pool_geometry(const KernelContext& ctx) {
  const ir::Shape& x = ctx.in(0).shape();  // (N, C, D...)
  const ir::Node& n = ctx.n();
  ir::WindowGeometry g =
      ir::window_geometry(n, ir::Shape(x.begin() + 2, x.end()), n.attr_ints("kernel_shape"),
                          n.attr_int("ceil_mode", 0) != 0);
  return to_window3(g);
}

// Taps [lo, hi) of a window starting at `start` that fall inside [0, size).
void valid_taps(int64_t start, int64_t k, int64_t d, int64_t size, int64_t& lo, int64_t& hi) {
  lo = start >= 0 ? 0 : (-start + d - 1) / d;
  if (start >= size) {
    hi = lo;
    return;
  }
  hi = start + (k - 1) * d < size ? k : (size - 1 - start) / d + 1;
  hi = std::max(hi, lo);
}

// Window start and valid tap range [lo, hi) of every output position along each axis.
struct AxisTaps {
  std::vector<int64_t> start, lo, hi;
};

std::array<AxisTaps, 3> axis_taps(const Window3& p) {
  std::array<AxisTaps, 3> t;
  for (int i = 0; i < 3; ++i)
    for (int64_t o = 0; o < p.out[i]; ++o) {
      int64_t st = o * p.s[i] - p.pb[i], lo, hi;
      valid_taps(st, p.k[i], p.d[i], p.in[i], lo, hi);
      t[i].start.push_back(st);
      t[i].lo.push_back(lo);
      t[i].hi.push_back(hi);
    }
  return t;
}

// Visits every output position of one (n, c) plane with its valid tap ranges.
template <typename F>
void for_each_window(const std::array<AxisTaps, 3>& t, F&& f) {
  int64_t o = 0;
  for (size_t o0 = 0; o0 < t[0].start.size(); ++o0)
    for (size_t o1 = 0; o1 < t[1].start.size(); ++o1)
      for (size_t o2 = 0; o2 < t[2].start.size(); ++o2, ++o) {
        int64_t st[3] = {t[0].start[o0], t[1].start[o1], t[2].start[o2]};
        int64_t lo[3] = {t[0].lo[o0], t[1].lo[o1], t[2].lo[o2]};
        int64_t hi[3] = {t[0].hi[o0], t[1].hi[o1], t[2].hi[o2]};
        f(o, st, lo, hi);
      }
}

// acc[o] = max(acc[o], src[o * stride]) for o in [from, to); kStride 0 means
// the runtime `stride`.
template <int64_t kStride>
void running_max(float* acc, const float* src, int64_t from, int64_t to, int64_t stride = 0) {
  const int64_t s = kStride ? kStride : stride;
  for (int64_t o = from; o < to; ++o) acc[o] = std::max(acc[o], src[o * s]);
}

// Values only, one output row at a time: for each kernel tap c along the last
// axis, the outputs it reaches form one range [first[c], last[c]), so the
// innermost loop is a branch-free running max over contiguous outputs.
void max_pool_plane(const Window3& p, const std::array<AxisTaps, 3>& t, const float* xp,
                    float* yp) {  // xp (D, H, W), yp (OD, OH, OW)
  const int64_t ow = p.out[2];
  std::vector<int64_t> first(static_cast<size_t>(p.k[2])), last(first.size());
  for (int64_t c = 0; c < p.k[2]; ++c) {
    // 0 <= o * s - pb + c * d < in  <=>  o in [ceil((pb - c d) / s), floor((in - 1 + pb - c d) /
    // s)].
    int64_t lo_num = p.pb[2] - c * p.d[2], hi_num = p.in[2] - 1 + p.pb[2] - c * p.d[2];
    int64_t lo = lo_num <= 0 ? 0 : (lo_num + p.s[2] - 1) / p.s[2];
    int64_t hi = hi_num < 0 ? -1 : hi_num / p.s[2];
    first[static_cast<size_t>(c)] = std::min(lo, ow);
    last[static_cast<size_t>(c)] = std::max(first[static_cast<size_t>(c)], std::min(hi + 1, ow));
  }
  for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
    for (int64_t o1 = 0; o1 < p.out[1]; ++o1) {
      float* acc = yp + (o0 * p.out[1] + o1) * ow;
      std::fill(acc, acc + ow, -std::numeric_limits<float>::infinity());
      size_t u0 = static_cast<size_t>(o0), u1 = static_cast<size_t>(o1);
      for (int64_t a = t[0].lo[u0]; a < t[0].hi[u0]; ++a)
        for (int64_t b = t[1].lo[u1]; b < t[1].hi[u1]; ++b) {
          const float* row =
              xp +
              ((t[0].start[u0] + a * p.d[0]) * p.in[1] + t[1].start[u1] + b * p.d[1]) * p.in[2];
          for (int64_t c = 0; c < p.k[2]; ++c) {
            const float* src = row - p.pb[2] + c * p.d[2];
            const int64_t from = first[static_cast<size_t>(c)], to = last[static_cast<size_t>(c)];
            // Constant strides let the compiler vectorise the strided loads.
            if (p.s[2] == 1)
              running_max<1>(acc, src, from, to);
            else if (p.s[2] == 2)
              running_max<2>(acc, src, from, to);
            else
              running_max<0>(acc, src, from, to, p.s[2]);
          }
        }
    }
}

void max_pool(KernelContext& ctx) {
  const ir::Tensor& x = ctx.in(0);                                       // (N, C, D...)
  ir::Tensor& y = ctx.out(0);                                            // (N, C, O...)
  int64_t* idx = ctx.has_out(1) ? ctx.out(1).data<int64_t>() : nullptr;  // as y
  bool col_major = ctx.n().attr_int("storage_order", 0) != 0;
  Window3 p = pool_geometry(ctx);
  std::array<AxisTaps, 3> taps = axis_taps(p);
  int64_t planes = x.shape()[0] * x.shape()[1];
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* xp = x.data<float>() + pl * p.in_size();
    float* yp = y.data<float>() + pl * p.out_size();
    if (!idx) {
      max_pool_plane(p, taps, xp, yp);
      continue;
    }
    for_each_window(taps, [&](int64_t o, const int64_t* st, const int64_t* lo, const int64_t* hi) {
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
}

void average_pool(KernelContext& ctx) {
  const ir::Tensor& x = ctx.in(0);  // (N, C, D...)
  ir::Tensor& y = ctx.out(0);       // (N, C, O...)
  bool include_pad = ctx.n().attr_int("count_include_pad", 0) != 0;
  Window3 p = pool_geometry(ctx);
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
      int64_t count = 1;
      for (int i = 0; i < 3; ++i) {
        int64_t l = lo[i], h = hi[i];
        // Taps inside the padded extent [-pb, in + pe) rather than inside X.
        if (include_pad)
          valid_taps(st[i] + p.pb[i], p.k[i], p.d[i], p.in[i] + p.pb[i] + p.pe[i], l, h);
        count *= h - l;
      }
      yp[o] = count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
    });
  }
}

void global_average_pool(KernelContext& ctx) {
  const ir::Tensor& x = ctx.in(0);  // (N, C, D...)
  ir::Tensor& y = ctx.out(0);       // (N, C, 1...)
  int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t size = planes == 0 ? 0 : x.numel() / planes;
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
