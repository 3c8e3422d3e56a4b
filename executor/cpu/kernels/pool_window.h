// Window walking shared by the pooling kernels (pool.cc) and their gradients
// (grad_pool.cc), so both visit exactly the same taps of every window.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "executor/cpu/kernels/window3.h"
#include "executor/device/window_math.h"
#include "ir/node.h"
#include "ir/ops/window.h"
#include "ir/shape.h"

namespace pipetrain::exec::cpu {

/// Geometry of a pool node `n` over an input of shape `x` (N, C, D...).
inline Window3 pool_geometry(const ir::Node& n, const ir::Shape& x) {
  ir::WindowGeometry g =
      ir::window_geometry(n, ir::Shape(x.begin() + 2, x.end()), n.attr_ints("kernel_shape"),
                          n.attr_int("ceil_mode", 0) != 0);
  return to_window3(g);
}

/// Taps [lo, hi) of a window starting at `start` that fall inside [0, size).
using device::valid_taps;

/// Window start and valid tap range [lo, hi) of every output position along each axis.
struct AxisTaps {
  std::vector<int64_t> start, lo, hi;
};

inline std::array<AxisTaps, 3> axis_taps(const Window3& p) {
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

/// Visits every output position o of one (n, c) plane, in row-major order,
/// as f(o, start[3], lo[3], hi[3]) with its valid tap ranges.
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

/// Along the last axis, the outputs o that kernel tap c reaches
/// (0 <= o s - pb + c d < in, i.e. o in [ceil((pb - c d) / s), floor((in - 1 + pb - c d) / s)])
/// form one range [first[c], last[c]), so a pool can run one output row at a
/// time as k[2] branch-free loops over contiguous outputs.
struct LastAxisRanges {
  std::vector<int64_t> first, last;  // (k[2])
};

inline LastAxisRanges last_axis_ranges(const Window3& p) {
  const int64_t ow = p.out[2];
  LastAxisRanges r;
  for (int64_t c = 0; c < p.k[2]; ++c) {
    const int64_t lo_num = p.pb[2] - c * p.d[2], hi_num = p.in[2] - 1 + p.pb[2] - c * p.d[2];
    const int64_t lo = lo_num <= 0 ? 0 : (lo_num + p.s[2] - 1) / p.s[2];
    const int64_t hi = hi_num < 0 ? -1 : hi_num / p.s[2];
    r.first.push_back(std::min(lo, ow));
    r.last.push_back(std::max(r.first.back(), std::min(hi + 1, ow)));
  }
  return r;
}

/// Calls f(row) with the plane offset ((i0 * in[1] + i1) * in[2]) of every
/// input row that a tap (a, b) of output row (o0, o1) reads, in scan order;
/// output o of the row reads that row at o * s[2] - pb[2] + c * d[2].
template <typename F>
void for_each_input_row(const Window3& p, const std::array<AxisTaps, 3>& t, int64_t o0, int64_t o1,
                        F&& f) {
  const size_t u0 = static_cast<size_t>(o0), u1 = static_cast<size_t>(o1);
  for (int64_t a = t[0].lo[u0]; a < t[0].hi[u0]; ++a)
    for (int64_t b = t[1].lo[u1]; b < t[1].hi[u1]; ++b)
      f(((t[0].start[u0] + a * p.d[0]) * p.in[1] + t[1].start[u1] + b * p.d[1]) * p.in[2]);
}

/// AveragePool's divisor along axis i for a window with start st and valid
/// taps [lo, hi): its taps inside X, or with count_include_pad its taps inside
/// the padded extent [-pb, in + pe) (what lies beyond the padding, which
/// ceil_mode can reach, never counts). The divisor is the product over axes.
inline int64_t average_pool_axis_count(const Window3& p, int i, int64_t st, int64_t lo, int64_t hi,
                                       bool include_pad) {
  if (include_pad) valid_taps(st + p.pb[i], p.k[i], p.d[i], p.in[i] + p.pb[i] + p.pe[i], lo, hi);
  return hi - lo;
}

/// AveragePool's divisor for a window (the product of the per-axis counts).
inline int64_t average_pool_count(const Window3& p, const int64_t* st, const int64_t* lo,
                                  const int64_t* hi, bool include_pad) {
  int64_t count = 1;
  for (int i = 0; i < 3; ++i)
    count *= average_pool_axis_count(p, i, st[i], lo[i], hi[i], include_pad);
  return count;
}

}  // namespace pipetrain::exec::cpu
