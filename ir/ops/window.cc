#include "ir/ops/window.h"

#include <algorithm>
#include <string>

#include "ir/error.h"

namespace pipetrain::ir {

namespace {

// Python-style floor division (total padding can be negative for ConvTranspose).
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

[[noreturn]] void fail(const Node& n, const std::string& msg) {
  throw ModelError(n.describe() + ": " + msg);
}

// An ints attribute with one value per spatial axis (or 2 per axis for pads).
std::vector<int64_t> per_axis(const Node& n, const std::string& key, size_t count, int64_t dflt,
                              bool positive) {
  std::vector<int64_t> v = n.attr_ints(key, std::vector<int64_t>(count, dflt));
  if (v.size() != count)
    fail(n, "attribute '" + key + "' has " + std::to_string(v.size()) + " values, expected " +
                std::to_string(count) + " for input spatial shape of rank " +
                std::to_string(count / (key == "pads" ? 2 : 1)));
  for (int64_t x : v)
    if (positive ? x < 1 : x < 0)
      fail(n, "attribute '" + key + "' has invalid value " + std::to_string(x));
  return v;
}

WindowGeometry common(const Node& n, const Shape& in_spatial, const std::vector<int64_t>& kernel) {
  size_t r = in_spatial.size();
  if (kernel.size() != r)
    fail(n, "kernel " + shape_str(kernel) + " does not match the input spatial shape " +
                shape_str(in_spatial));
  for (int64_t k : kernel)
    if (k < 1) fail(n, "kernel shape " + shape_str(kernel) + " is invalid");
  WindowGeometry g;
  g.in = in_spatial;
  g.kernel = kernel;
  g.strides = per_axis(n, "strides", r, 1, true);
  g.dilations = per_axis(n, "dilations", r, 1, true);
  g.output_padding.assign(r, 0);
  g.pads_begin.assign(r, 0);
  g.pads_end.assign(r, 0);
  g.out.assign(r, 0);
  return g;
}

std::string auto_pad_of(const Node& n) {
  std::string a = n.attr_string("auto_pad", "NOTSET");
  if (a != "NOTSET" && a != "SAME_UPPER" && a != "SAME_LOWER" && a != "VALID")
    throw UnsupportedOp(n.describe() + ": auto_pad '" + a + "' is not supported");
  if (a != "NOTSET" && n.has_attr("pads"))
    fail(n, "auto_pad " + a + " and explicit pads are mutually exclusive");
  return a;
}

void read_explicit_pads(const Node& n, WindowGeometry& g) {
  size_t r = g.rank();
  std::vector<int64_t> pads = per_axis(n, "pads", 2 * r, 0, false);
  for (size_t i = 0; i < r; ++i) {
    g.pads_begin[i] = pads[i];
    g.pads_end[i] = pads[r + i];
  }
}

}  // namespace

WindowGeometry window_geometry(const Node& n, const Shape& in_spatial,
                               const std::vector<int64_t>& kernel, bool ceil_mode) {
  WindowGeometry g = common(n, in_spatial, kernel);
  std::string auto_pad = auto_pad_of(n);
  if (auto_pad == "NOTSET") read_explicit_pads(n, g);
  for (size_t i = 0; i < g.rank(); ++i) {
    int64_t in = g.in[i], s = g.strides[i], ext = g.extent(i);
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out[i] = ceil_div(in, s);
      int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * s + ext - in);
      int64_t small = total / 2;
      g.pads_begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pads_end[i] = total - g.pads_begin[i];
    } else if (auto_pad == "VALID") {
      g.out[i] = ceil_div(in - ext + 1, s);
    } else {
      int64_t span = in + g.pads_begin[i] + g.pads_end[i] - ext;
      if (span < 0) {
        g.out[i] = 0;
      } else if (ceil_mode) {
        g.out[i] = ceil_div(span, s) + 1;
        // The last window must start inside the input or the left padding.
        if ((g.out[i] - 1) * s >= in + g.pads_begin[i]) --g.out[i];
      } else {
        g.out[i] = span / s + 1;
      }
    }
    if (g.out[i] < 1)
      fail(n, "input spatial shape " + shape_str(in_spatial) + " is too small for kernel " +
                  shape_str(kernel) + " (dilations " + shape_str(g.dilations) + ", pads " +
                  shape_str(g.pads_begin) + " + " + shape_str(g.pads_end) + ")");
  }
  return g;
}

WindowGeometry transpose_geometry(const Node& n, const Shape& in_spatial,
                                  const std::vector<int64_t>& kernel) {
  WindowGeometry g = common(n, in_spatial, kernel);
  size_t r = g.rank();
  std::string auto_pad = auto_pad_of(n);
  g.output_padding = per_axis(n, "output_padding", r, 0, false);
  std::vector<int64_t> out_shape = n.attr_ints("output_shape");
  if (out_shape.size() == r + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && out_shape.size() != r)
    fail(n, "output_shape " + shape_str(out_shape) + " does not match the input spatial shape " +
                shape_str(in_spatial));
  if (out_shape.empty() && auto_pad == "NOTSET") read_explicit_pads(n, g);
  for (size_t i = 0; i < r; ++i) {
    int64_t full = g.strides[i] * (g.in[i] - 1) + g.output_padding[i] + g.extent(i);
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t want = out_shape.empty() ? g.in[i] * g.strides[i] : out_shape[i];
      int64_t total = full - want;
      int64_t half = floor_div(total, 2);
      g.pads_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      g.pads_end[i] = total - g.pads_begin[i];
    }
    g.out[i] = full - g.pads_begin[i] - g.pads_end[i];
    if (g.out[i] < 1)
      fail(n, "output spatial size " + std::to_string(g.out[i]) + " along axis " +
                  std::to_string(i) + " is not positive (input " + shape_str(in_spatial) +
                  ", kernel " + shape_str(kernel) + ")");
  }
  return g;
}

}  // namespace pipetrain::ir
