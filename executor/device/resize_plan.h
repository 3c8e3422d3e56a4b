// Resize's interpolation as per-axis tap tables, built on the host from the
// node's attributes (ONNX's reference, onnx/reference/ops/op_resize.py): the
// output coordinate o of axis d maps back to x(o) by the coordinate
// transformation, and the value is a weighted sum over the taps of x(o)'s
// neighbours (1 for nearest, 2 for linear, 4 for cubic; indices clamped to
// the axis, as the reference's edge padding). With antialias, linear and
// cubic filters are stretched by 1 / scale when downscaling (2 ceil(1 / s)
// and 4 ceil(1 / s) taps, weights normalised to sum 1). An N-D resize is the product
// of its axes' 1-D maps, so the forward op sums over tap combinations and
// the gradient applies each axis's transpose in turn.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "executor/kernel_context.h"
#include "ir/error.h"
#include "ir/shape.h"

namespace pipetrain::exec::device {

/// One axis: `taps` entries per output coordinate (index into the input
/// axis, weight); outside[o]: tf_crop_and_resize mapped o off the input.
struct ResizeAxis {
  int64_t in = 1, out = 1, taps = 1;
  std::vector<int64_t> index;    // (out, taps)
  std::vector<double> weight;    // (out, taps)
  std::vector<uint8_t> outside;  // (out)
  bool identity() const {
    if (in != out || taps != 1) return false;
    for (int64_t o = 0; o < out; ++o)
      if (index[static_cast<size_t>(o)] != o || weight[static_cast<size_t>(o)] != 1.0 ||
          outside[static_cast<size_t>(o)])
        return false;
    return true;
  }
};

struct ResizePlan {
  std::vector<ResizeAxis> axes;
  double extrapolation = 0.0;
};

/// The scale per axis of a Resize node (X's shape `in`, Y's `out`): the
/// scales input where given, else out / in; roi (start, end) per axis.
inline ResizePlan resize_plan(const KernelContext& h, const ir::Shape& in, const ir::Shape& out) {
  const ir::Node& n = h.n();
  const size_t rank = in.size();
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (axes.empty())
    for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  for (int64_t& a : axes) a = ir::normalize_axis(a, static_cast<int64_t>(rank));
  std::vector<double> scale(rank, 1.0), start(rank, 0.0), end(rank, 1.0);
  for (size_t d = 0; d < rank; ++d)
    scale[d] = in[d] == 0 ? 1.0 : static_cast<double>(out[d]) / static_cast<double>(in[d]);
  if (h.has_in(2) && h.in(2).numel() > 0) {
    const ir::Tensor& s = h.in(2);
    if (static_cast<size_t>(s.numel()) != axes.size())
      throw ModelError(n.describe() + ": " + std::to_string(s.numel()) + " scales for " +
                       std::to_string(axes.size()) + " axes");
    for (size_t k = 0; k < axes.size(); ++k)
      scale[static_cast<size_t>(axes[k])] = static_cast<double>(s.data<float>()[k]);
  }
  const std::string ctm = n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (ctm == "tf_crop_and_resize") {
    if (!h.has_in(1) || h.in(1).numel() != static_cast<int64_t>(2 * axes.size()))
      throw ModelError(n.describe() + ": tf_crop_and_resize needs a roi of 2 x " +
                       std::to_string(axes.size()) + " values");
    const ir::Tensor& roi = h.in(1);
    for (size_t k = 0; k < axes.size(); ++k) {
      const auto get = [&](size_t i) { return static_cast<double>(roi.data<float>()[i]); };
      start[static_cast<size_t>(axes[k])] = get(k);
      end[static_cast<size_t>(axes[k])] = get(k + axes.size());
    }
  }
  const std::string mode = n.attr_string("mode", "nearest");
  const std::string nearest = n.attr_string("nearest_mode", "round_prefer_floor");
  const double a = n.attr_float("cubic_coeff_a", -0.75f);
  const bool exclude = n.attr_int("exclude_outside", 0) != 0;
  const bool antialias = n.attr_int("antialias", 0) != 0 && mode != "nearest";
  ResizePlan plan;
  plan.extrapolation = n.attr_float("extrapolation_value", 0.0f);
  for (size_t d = 0; d < rank; ++d) {
    ResizeAxis ax;
    ax.in = in[d];
    ax.out = out[d];
    // The filter is stretched by 1 / filter_scale (antialias: min(scale, 1)). Taps
    // run from `reach` below the neighbour floor(x) (the reference's start).
    const double filter_scale = antialias ? std::min(scale[d], 1.0) : 1.0;
    const int64_t reach =
        mode == "nearest"
            ? 0
            : static_cast<int64_t>(std::floor((mode == "linear" ? -1.0 : -2.0) / filter_scale)) + 1;
    ax.taps = mode == "nearest" ? 1 : 2 - 2 * reach;
    ax.index.assign(static_cast<size_t>(ax.out * ax.taps), 0);
    ax.weight.assign(static_cast<size_t>(ax.out * ax.taps), 0.0);
    ax.outside.assign(static_cast<size_t>(ax.out), 0);
    const double s = scale[d],
                 width = s * static_cast<double>(ax.in);  // the reference's float width
    const double last = static_cast<double>(ax.in - 1);
    for (int64_t o = 0; o < ax.out; ++o) {
      const double xo = static_cast<double>(o);
      double x;
      if (ctm == "align_corners")
        x = width == 1.0 ? 0.0 : xo * last / (width - 1.0);
      else if (ctm == "asymmetric")
        x = xo / s;
      else if (ctm == "pytorch_half_pixel")
        x = width == 1.0 ? -0.5 : (xo + 0.5) / s - 0.5;
      else if (ctm == "half_pixel")
        x = (xo + 0.5) / s - 0.5;
      else if (ctm == "tf_half_pixel_for_nn")  // opset 11's, for nearest
        x = (xo + 0.5) / s;
      else {  // tf_crop_and_resize
        x = width == 1.0 ? (end[d] - start[d]) * last / 2.0
                         : xo * (end[d] - start[d]) * last / (width - 1.0);
        x += start[d] * last;
        if (x < 0.0 || x > last) {
          ax.outside[static_cast<size_t>(o)] = 1;
          continue;
        }
      }
      // The reference's neighbours: floor(x) and up, one lower when x is whole.
      double base = std::floor(x), r = x - base;
      if (r == 0.0) {
        base -= 1.0;
        r = 1.0;
      }
      std::vector<double> w;
      int64_t first = static_cast<int64_t>(base);
      if (mode == "nearest") {
        bool up;
        if (r == 1.0 || nearest == "ceil")
          up = true;
        else if (nearest == "floor")
          up = false;
        else if (nearest == "round_prefer_ceil")
          up = r >= 0.5;
        else
          up = r > 0.5;
        first += up ? 1 : 0;
        w = {1.0};
      } else if (antialias) {  // the reference's _linear/_cubic_coeffs_antialias
        double sum = 0.0;
        for (int64_t t = 0; t < ax.taps; ++t) {
          const double u = std::abs((static_cast<double>(reach + t) - r) * filter_scale);
          double v;
          if (mode == "linear")
            v = std::max(0.0, 1.0 - u);
          else if (u <= 1.0)
            v = ((a + 2.0) * u - (a + 3.0)) * u * u + 1.0;
          else if (u < 2.0)
            v = ((a * u - 5.0 * a) * u + 8.0 * a) * u - 4.0 * a;
          else
            v = 0.0;
          w.push_back(v);
          sum += v;
        }
        for (double& v : w) v /= sum;
        first += reach;
      } else if (mode == "linear") {
        w = {1.0 - r, r};
      } else {
        const double p = r + 1.0, q = 1.0 - r, q1 = q + 1.0;
        w = {((a * p - 5.0 * a) * p + 8.0 * a) * p - 4.0 * a,
             ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0, ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
             ((a * q1 - 5.0 * a) * q1 + 8.0 * a) * q1 - 4.0 * a};
        first -= 1;
      }
      if (exclude) {
        double sum = 0.0;
        for (size_t t = 0; t < w.size(); ++t) {
          const int64_t i = first + static_cast<int64_t>(t);
          if (i < 0 || i >= ax.in) w[t] = 0.0;
          sum += w[t];
        }
        for (double& v : w) v /= sum;
      }
      for (size_t t = 0; t < w.size(); ++t) {
        const int64_t i = first + static_cast<int64_t>(t);
        const size_t at = static_cast<size_t>(o * ax.taps) + t;
        ax.index[at] = i < 0 ? 0 : i > ax.in - 1 ? ax.in - 1 : i;
        ax.weight[at] = w[t];
      }
    }
    plan.axes.push_back(std::move(ax));
  }
  return plan;
}

}  // namespace pipetrain::exec::device
