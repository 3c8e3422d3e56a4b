// Shared implementations of RoiAlign (ONNX's definition, as onnxruntime
// computes it: bilinear samples on a sampling_ratio grid per output bin,
// averaged or maxed) and of its gradient for the feature map (average mode).
// Forward: one functor call per output element. Gradient: one call per
// (n, c) plane walking the rois of image n and their bins in order, adding
// into the plane, so results are deterministic without atomics.
#pragma once

#include <cmath>
#include <string>

#include "executor/device/ops_elementwise.h"

namespace pipetrain::exec::device {

struct RoiGeometry {
  int64_t n, c, h, w, rois, oh, ow, sampling;
  float scale;
  bool half_pixel, max_mode;
};

/// Calls f(plane offset, weight) for every tap of every sample of bin (ph, pw)
/// of roi `box` (x1, y1, x2, y2); returns the sample count the average divides by.
template <typename F>
PIPETRAIN_HD int64_t roi_bin_taps(const RoiGeometry& g, const float* box, int64_t ph, int64_t pw,
                                  F&& f) {
  const float offset = g.half_pixel ? 0.5f : 0.0f;
  const float x1 = box[0] * g.scale - offset, y1 = box[1] * g.scale - offset;
  const float x2 = box[2] * g.scale - offset, y2 = box[3] * g.scale - offset;
  float rw = x2 - x1, rh = y2 - y1;
  if (!g.half_pixel) {  // the legacy mode keeps rois at least one pixel wide
    rw = rw > 1 ? rw : 1;
    rh = rh > 1 ? rh : 1;
  }
  const float bin_h = rh / static_cast<float>(g.oh), bin_w = rw / static_cast<float>(g.ow);
  const int64_t grid_h =
      g.sampling > 0 ? g.sampling : static_cast<int64_t>(std::ceil(rh / static_cast<float>(g.oh)));
  const int64_t grid_w =
      g.sampling > 0 ? g.sampling : static_cast<int64_t>(std::ceil(rw / static_cast<float>(g.ow)));
  for (int64_t iy = 0; iy < grid_h; ++iy) {
    float y = y1 + static_cast<float>(ph) * bin_h +
              (static_cast<float>(iy) + 0.5f) * bin_h / static_cast<float>(grid_h);
    for (int64_t ix = 0; ix < grid_w; ++ix) {
      float x = x1 + static_cast<float>(pw) * bin_w +
                (static_cast<float>(ix) + 0.5f) * bin_w / static_cast<float>(grid_w);
      const int64_t sample = iy * grid_w + ix;
      if (y < -1.0f || y > static_cast<float>(g.h) || x < -1.0f || x > static_cast<float>(g.w)) {
        f(sample, int64_t{-1}, 0.0f);  // an empty sample: it still counts
        continue;
      }
      float yy = y <= 0 ? 0 : y, xx = x <= 0 ? 0 : x;
      int64_t y_lo = static_cast<int64_t>(yy), x_lo = static_cast<int64_t>(xx), y_hi, x_hi;
      if (y_lo >= g.h - 1) {
        y_hi = y_lo = g.h - 1;
        yy = static_cast<float>(y_lo);
      } else {
        y_hi = y_lo + 1;
      }
      if (x_lo >= g.w - 1) {
        x_hi = x_lo = g.w - 1;
        xx = static_cast<float>(x_lo);
      } else {
        x_hi = x_lo + 1;
      }
      const float ly = yy - static_cast<float>(y_lo), lx = xx - static_cast<float>(x_lo);
      const float hy = 1 - ly, hx = 1 - lx;
      f(sample, y_lo * g.w + x_lo, hy * hx);
      f(sample, y_lo * g.w + x_hi, hy * lx);
      f(sample, y_hi * g.w + x_lo, ly * hx);
      f(sample, y_hi * g.w + x_hi, ly * lx);
    }
  }
  const int64_t count = grid_h * grid_w;
  return count > 0 ? count : 1;
}

struct RoiAlignForward {
  const float *x, *rois;
  const int64_t* batch;
  float* y;
  RoiGeometry g;
  PIPETRAIN_HD void operator()(int64_t i) const {  // i = (roi, c, ph, pw)
    const int64_t pw = i % g.ow, ph = (i / g.ow) % g.oh, c = (i / (g.ow * g.oh)) % g.c;
    const int64_t r = i / (g.ow * g.oh * g.c);
    const float* plane = x + (batch[r] * g.c + c) * g.h * g.w;
    float sum = 0, best = 0, sample_max = 0;
    int64_t current = -1;
    bool have = false;
    const int64_t count =
        roi_bin_taps(g, rois + 4 * r, ph, pw, [&](int64_t s, int64_t at, float wt) {
          const float v = at >= 0 ? wt * plane[at] : 0.0f;
          sum += v;
          // onnxruntime's max mode: each sample's largest weighted tap, then the largest sample.
          if (s != current) {
            if (current >= 0) best = have ? (sample_max > best ? sample_max : best) : sample_max;
            have = have || current >= 0;
            current = s;
            sample_max = v;
          } else if (v > sample_max) {
            sample_max = v;
          }
        });
    if (g.max_mode) {
      if (current >= 0) best = have ? (sample_max > best ? sample_max : best) : sample_max;
      y[i] = best;
    } else {
      y[i] = sum / static_cast<float>(count);
    }
  }
};

/// dX of plane (n, c) in average mode: every bin of every roi of image n adds dY / count.
struct RoiAlignInputGrad {
  const float *dy, *rois;
  const int64_t* batch;
  float* dx;
  RoiGeometry g;
  PIPETRAIN_HD void operator()(int64_t q) const {
    const int64_t n = q / g.c, c = q - n * g.c;
    float* plane = dx + q * g.h * g.w;
    for (int64_t k = 0; k < g.h * g.w; ++k) plane[k] = 0;
    for (int64_t r = 0; r < g.rois; ++r) {
      if (batch[r] != n) continue;
      for (int64_t ph = 0; ph < g.oh; ++ph)
        for (int64_t pw = 0; pw < g.ow; ++pw) {
          const float* box = rois + 4 * r;
          const int64_t count = roi_bin_taps(g, box, ph, pw, [](int64_t, int64_t, float) {});
          const float d = dy[((r * g.c + c) * g.oh + ph) * g.ow + pw] / static_cast<float>(count);
          roi_bin_taps(g, box, ph, pw, [&](int64_t, int64_t at, float wt) {
            if (at >= 0) plane[at] += wt * d;
          });
        }
    }
  }
};

inline RoiGeometry roi_geometry(const ir::Node& n, const ir::Shape& x, int64_t rois) {
  RoiGeometry g{x[0],
                x[1],
                x[2],
                x[3],
                rois,
                n.attr_int("output_height", 1),
                n.attr_int("output_width", 1),
                n.attr_int("sampling_ratio", 0),
                n.attr_float("spatial_scale", 1.0f),
                n.attr_string("coordinate_transformation_mode", "half_pixel") == "half_pixel",
                n.attr_string("mode", "avg") == "max"};
  return g;
}

/// Batch indices read on the host and checked against N.
inline std::vector<int64_t> roi_batch_indices(const DeviceOpArgs& a, size_t at, int64_t images) {
  std::vector<int64_t> b = a.host->in(at).to_i64();
  for (int64_t v : b)
    if (v < 0 || v >= images)
      throw RuntimeFault(a.n().describe() + ": batch index " + std::to_string(v) +
                         " is outside the " + std::to_string(images) + " images");
  return b;
}

template <typename Exec>
void roi_align_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &rois = a.in[1], &y = a.out[0];
  if (y.numel() == 0) return;
  const RoiGeometry g = roi_geometry(a.n(), x.shape, rois.shape[0]);
  const int64_t* batch = ex.upload(roi_batch_indices(a, 2, g.n));
  ex.for_each(y.numel(),
              RoiAlignForward{x.data<float>(), rois.data<float>(), batch, y.data<float>(), g});
}

/// (dY, X, rois, batch_indices) -> dX.
template <typename Exec>
void roi_align_grad_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &dy = a.in[0], &x = a.in[1], &rois = a.in[2], &dx = a.out[0];
  if (dx.numel() == 0) return;
  const RoiGeometry g = roi_geometry(a.n(), x.shape, rois.shape[0]);
  const int64_t* batch = ex.upload(roi_batch_indices(a, 3, g.n));
  ex.for_each(g.n * g.c,
              RoiAlignInputGrad{dy.data<float>(), rois.data<float>(), batch, dx.data<float>(), g});
}

}  // namespace pipetrain::exec::device
