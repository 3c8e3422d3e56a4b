// Shared implementations of GridSample (2-D, as torch.nn.functional.
// grid_sample, which ONNX's definition follows) and its gradient. Bilinear
// and nearest move the source coordinate into range first (border clamps,
// reflection mirrors); bicubic pads each of its 16 taps instead. Forward:
// one functor call per output pixel, all channels. Gradient: dX by one call
// per (n, c) plane walking the output pixels in order and adding into the
// plane (deterministic, no atomics); dGrid by one call per output pixel
// summing over channels, through the coordinate's derivative.
#pragma once

#include <cmath>
#include <string>

#include "executor/device/ops_elementwise.h"

namespace pipetrain::exec::device {

enum class GridMode { kBilinear, kNearest, kBicubic };
enum class GridPadding { kZeros, kBorder, kReflection };

struct GridGeometry {
  int64_t n, c, h, w, ho, wo;
  GridMode mode;
  GridPadding padding;
  bool align;
};

/// Normalised g in [-1, 1] to a source coordinate over `size`; *d gets d/dg.
PIPETRAIN_HD inline float grid_unnormalize(float g, int64_t size, bool align, float* d) {
  if (align) {
    *d = static_cast<float>(size - 1) / 2;
    return (g + 1) / 2 * static_cast<float>(size - 1);
  }
  *d = static_cast<float>(size) / 2;
  return ((g + 1) * static_cast<float>(size) - 1) / 2;
}

/// x clamped to [0, size - 1]; *d *= 0 where it clamps.
PIPETRAIN_HD inline float grid_clip(float x, int64_t size, float* d) {
  const float hi = static_cast<float>(size - 1);
  if (x <= 0) {
    *d = 0;
    return 0;
  }
  if (x >= hi) {
    *d = 0;
    return hi;
  }
  return x;
}

/// x mirrored into [lo2 / 2, hi2 / 2] (PyTorch's reflect_coordinates); *d flips sign on odd flips.
PIPETRAIN_HD inline float grid_reflect(float x, float lo2, float hi2, float* d) {
  if (lo2 == hi2) {
    *d = 0;
    return 0;
  }
  const float lo = lo2 / 2, span = (hi2 - lo2) / 2;
  float in = x - lo;
  if (in < 0) {
    *d = -*d;
    in = -in;
  }
  const float extra = std::fmod(in, span);
  const int flips = static_cast<int>(std::floor(in / span));
  if (flips % 2 == 0) return extra + lo;
  *d = -*d;
  return span - extra + lo;
}

/// The source coordinate of bilinear / nearest sampling: unnormalised, then
/// clamped or mirrored by the padding; *d gets its derivative by g.
PIPETRAIN_HD inline float grid_source(float g, int64_t size, const GridGeometry& geo, float* d) {
  float x = grid_unnormalize(g, size, geo.align, d);
  if (geo.padding == GridPadding::kBorder) {
    x = grid_clip(x, size, d);
  } else if (geo.padding == GridPadding::kReflection) {
    x = geo.align ? grid_reflect(x, 0, 2 * static_cast<float>(size - 1), d)
                  : grid_reflect(x, -1, 2 * static_cast<float>(size) - 1, d);
    x = grid_clip(x, size, d);
  }
  return x;
}

/// A bicubic tap index padded as the padding says; -1 where zeros read nothing.
PIPETRAIN_HD inline int64_t grid_tap(int64_t i, int64_t size, const GridGeometry& geo) {
  if (geo.padding == GridPadding::kZeros) return i >= 0 && i < size ? i : -1;
  float d = 1;
  float x = static_cast<float>(i);
  if (geo.padding == GridPadding::kReflection)
    x = geo.align ? grid_reflect(x, 0, 2 * static_cast<float>(size - 1), &d)
                  : grid_reflect(x, -1, 2 * static_cast<float>(size) - 1, &d);
  x = grid_clip(x, size, &d);
  return static_cast<int64_t>(x);
}

/// Cubic convolution weights (A = -0.75) of the 4 taps at fraction t, and their derivatives.
PIPETRAIN_HD inline void grid_cubic(float t, float w[4], float dw[4]) {
  const float a = -0.75f, u = t + 1, s = 1 - t, v = 2 - t;
  w[0] = ((a * u - 5 * a) * u + 8 * a) * u - 4 * a;
  w[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  w[2] = ((a + 2) * s - (a + 3)) * s * s + 1;
  w[3] = ((a * v - 5 * a) * v + 8 * a) * v - 4 * a;
  dw[0] = (3 * a * u - 10 * a) * u + 8 * a;
  dw[1] = (3 * (a + 2) * t - 2 * (a + 3)) * t;
  dw[2] = -(3 * (a + 2) * s - 2 * (a + 3)) * s;
  dw[3] = -((3 * a * v - 10 * a) * v + 8 * a);
}

/// The taps of one output pixel: up to 16 (plane offset, weight) pairs and
/// the weights' derivatives by the grid's x and y.
struct GridTaps {
  int count = 0;
  int64_t at[16];
  float w[16], dwx[16], dwy[16];
  PIPETRAIN_HD void add(int64_t a, float weight, float dx, float dy) {
    at[count] = a;
    w[count] = weight;
    dwx[count] = dx;
    dwy[count] = dy;
    ++count;
  }
};

PIPETRAIN_HD inline GridTaps grid_taps(const GridGeometry& geo, float gx, float gy) {
  GridTaps t;
  if (geo.mode == GridMode::kBicubic) {
    float mx, my;
    const float x = grid_unnormalize(gx, geo.w, geo.align, &mx);
    const float y = grid_unnormalize(gy, geo.h, geo.align, &my);
    const float x0 = std::floor(x), y0 = std::floor(y);
    float wx[4], dwx[4], wy[4], dwy[4];
    grid_cubic(x - x0, wx, dwx);
    grid_cubic(y - y0, wy, dwy);
    for (int j = 0; j < 4; ++j) {
      const int64_t r = grid_tap(static_cast<int64_t>(y0) - 1 + j, geo.h, geo);
      for (int i = 0; i < 4; ++i) {
        const int64_t c = grid_tap(static_cast<int64_t>(x0) - 1 + i, geo.w, geo);
        if (r < 0 || c < 0) continue;
        t.add(r * geo.w + c, wx[i] * wy[j], dwx[i] * wy[j] * mx, wx[i] * dwy[j] * my);
      }
    }
    return t;
  }
  float mx = 1, my = 1;
  const float x = grid_source(gx, geo.w, geo, &mx), y = grid_source(gy, geo.h, geo, &my);
  if (geo.mode == GridMode::kNearest) {
    const float rx = std::nearbyint(x), ry = std::nearbyint(y);
    if (rx >= 0 && rx < static_cast<float>(geo.w) && ry >= 0 && ry < static_cast<float>(geo.h))
      t.add(static_cast<int64_t>(ry) * geo.w + static_cast<int64_t>(rx), 1, 0, 0);
    return t;
  }
  const float x0 = std::floor(x), y0 = std::floor(y);
  const float fx = x - x0, fy = y - y0;
  for (int j = 0; j < 2; ++j) {
    const int64_t r = static_cast<int64_t>(y0) + j;
    const float wy = j ? fy : 1 - fy, dwy = (j ? 1.f : -1.f) * my;
    for (int i = 0; i < 2; ++i) {
      const int64_t c = static_cast<int64_t>(x0) + i;
      if (r < 0 || r >= geo.h || c < 0 || c >= geo.w) continue;
      const float wx = i ? fx : 1 - fx, dwx = (i ? 1.f : -1.f) * mx;
      t.add(r * geo.w + c, wx * wy, dwx * wy, wx * dwy);
    }
  }
  return t;
}

struct GridSampleForward {
  const float *x, *grid;
  float* y;
  GridGeometry geo;
  PIPETRAIN_HD void operator()(int64_t p) const {  // p = (n, ho, wo)
    const int64_t n = p / (geo.ho * geo.wo), hw = p - n * geo.ho * geo.wo;
    const GridTaps t = grid_taps(geo, grid[2 * p], grid[2 * p + 1]);
    for (int64_t c = 0; c < geo.c; ++c) {
      const float* plane = x + (n * geo.c + c) * geo.h * geo.w;
      float acc = 0;
      for (int k = 0; k < t.count; ++k) acc += t.w[k] * plane[t.at[k]];
      y[(n * geo.c + c) * geo.ho * geo.wo + hw] = acc;
    }
  }
};

/// dX of one (n, c) plane: zeroed, then every output pixel's dY spread over its taps in order.
struct GridSampleInputGrad {
  const float *dy, *grid;
  float* dx;
  GridGeometry geo;
  PIPETRAIN_HD void operator()(int64_t q) const {  // q = (n, c)
    const int64_t n = q / geo.c;
    float* plane = dx + q * geo.h * geo.w;
    for (int64_t i = 0; i < geo.h * geo.w; ++i) plane[i] = 0;
    for (int64_t hw = 0; hw < geo.ho * geo.wo; ++hw) {
      const int64_t p = n * geo.ho * geo.wo + hw;
      const GridTaps t = grid_taps(geo, grid[2 * p], grid[2 * p + 1]);
      const float g = dy[q * geo.ho * geo.wo + hw];
      for (int k = 0; k < t.count; ++k) plane[t.at[k]] += t.w[k] * g;
    }
  }
};

/// dGrid of one output pixel: sum over channels of dY times the taps' weight derivatives.
struct GridSampleGridGrad {
  const float *dy, *x, *grid;
  float* dgrid;
  GridGeometry geo;
  PIPETRAIN_HD void operator()(int64_t p) const {
    const int64_t n = p / (geo.ho * geo.wo), hw = p - n * geo.ho * geo.wo;
    const GridTaps t = grid_taps(geo, grid[2 * p], grid[2 * p + 1]);
    float gx = 0, gy = 0;
    for (int64_t c = 0; c < geo.c; ++c) {
      const float* plane = x + (n * geo.c + c) * geo.h * geo.w;
      const float g = dy[(n * geo.c + c) * geo.ho * geo.wo + hw];
      for (int k = 0; k < t.count; ++k) {
        gx += g * t.dwx[k] * plane[t.at[k]];
        gy += g * t.dwy[k] * plane[t.at[k]];
      }
    }
    dgrid[2 * p] = gx;
    dgrid[2 * p + 1] = gy;
  }
};

inline GridGeometry grid_geometry(const ir::Node& n, const ir::Shape& x, const ir::Shape& grid) {
  GridGeometry g{x[0],
                 x[1],
                 x[2],
                 x[3],
                 grid[1],
                 grid[2],
                 GridMode::kBilinear,
                 GridPadding::kZeros,
                 n.attr_int("align_corners", 0) != 0};
  const std::string mode = n.attr_string("mode", "bilinear");
  g.mode = mode == "nearest"   ? GridMode::kNearest
           : mode == "bicubic" ? GridMode::kBicubic
                               : GridMode::kBilinear;
  const std::string pad = n.attr_string("padding_mode", "zeros");
  g.padding = pad == "border"       ? GridPadding::kBorder
              : pad == "reflection" ? GridPadding::kReflection
                                    : GridPadding::kZeros;
  return g;
}

template <typename Exec>
void grid_sample_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &grid = a.in[1], &y = a.out[0];
  if (y.numel() == 0) return;
  const GridGeometry geo = grid_geometry(a.n(), x.shape, grid.shape);
  ex.for_each(geo.n * geo.ho * geo.wo,
              GridSampleForward{x.data<float>(), grid.data<float>(), y.data<float>(), geo});
}

/// (dY, X, grid) -> (dX, dGrid), either output absent when not wanted.
template <typename Exec>
void grid_sample_grad_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &dy = a.in[0], &x = a.in[1], &grid = a.in[2];
  const GridGeometry geo = grid_geometry(a.n(), x.shape, grid.shape);
  if (a.has_out(0) && a.out[0].numel() > 0)
    ex.for_each(geo.n * geo.c, GridSampleInputGrad{dy.data<float>(), grid.data<float>(),
                                                   a.out[0].data<float>(), geo});
  if (a.has_out(1) && a.out[1].numel() > 0)
    ex.for_each(geo.n * geo.ho * geo.wo,
                GridSampleGridGrad{dy.data<float>(), x.data<float>(), grid.data<float>(),
                                   a.out[1].data<float>(), geo});
}

}  // namespace pipetrain::exec::device
