// Sliding-window geometry shared by Conv, ConvTranspose and the pools: reads
// kernel_shape / strides / dilations / pads / auto_pad (and output_padding /
// output_shape for ConvTranspose) and computes the explicit pads and the
// output spatial sizes. The shape rules and the CPU kernels both call it, so
// the two can never disagree.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/node.h"
#include "ir/shape.h"

namespace pipetrain::ir {

struct WindowGeometry {
  std::vector<int64_t> in;          // input spatial sizes
  std::vector<int64_t> kernel;      // kernel spatial sizes
  std::vector<int64_t> strides;     // default 1
  std::vector<int64_t> dilations;   // default 1
  std::vector<int64_t> pads_begin;  // may be negative for ConvTranspose (output grows)
  std::vector<int64_t> pads_end;
  std::vector<int64_t> output_padding;  // ConvTranspose only, else zeros
  std::vector<int64_t> out;             // output spatial sizes

  size_t rank() const { return in.size(); }
  /// Extent of the dilated kernel along axis i: (k - 1) * d + 1.
  int64_t extent(size_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

/// Conv and pools: out = floor_or_ceil((in + pb + pe - extent) / s) + 1 with
/// NOTSET pads, ceil(in / s) with SAME_UPPER/SAME_LOWER (the odd pad goes to
/// the end/begin), ceil((in - extent + 1) / s) with VALID. With ceil_mode a
/// window that would start in the right padding is dropped (PyTorch, ONNX 19+).
/// `kernel` comes from kernel_shape or from the weights. Throws ModelError
/// (UnsupportedOp for an unknown auto_pad) naming the node and shapes.
WindowGeometry window_geometry(const Node& n, const Shape& in_spatial,
                               const std::vector<int64_t>& kernel, bool ceil_mode);

/// ConvTranspose: out = s (in - 1) + output_padding + extent - pb - pe. With
/// output_shape (spatial, or full rank) or SAME_* (out = in * s) the pads are
/// derived from total = s (in - 1) + output_padding + extent - out:
/// SAME_UPPER puts floor(total / 2) first, otherwise the extra half goes first.
WindowGeometry transpose_geometry(const Node& n, const Shape& in_spatial,
                                  const std::vector<int64_t>& kernel);

}  // namespace pipetrain::ir
