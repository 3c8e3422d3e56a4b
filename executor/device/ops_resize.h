// Shared implementations of Resize and its gradient from the per-axis tap
// tables of resize_plan.h. Forward: one functor call per output element sums
// its taps' product weights times the input (in double). Gradient: each
// axis that moves in turn, its transpose as one functor call per element of
// the narrowed tensor summing, in a fixed order, the outputs that tapped it
// (a CSR table), so no atomics and deterministic results.
#pragma once

#include <numeric>
#include <string>
#include <vector>

#include "executor/device/ops_elementwise.h"
#include "executor/device/resize_plan.h"

namespace pipetrain::exec::device {

struct ResizeGather {
  const float* x;
  float* y;
  int rank = 0;
  int64_t out_dims[kMaxDims], in_strides[kMaxDims], taps[kMaxDims];
  const int64_t* index[kMaxDims];
  const double* weight[kMaxDims];
  const uint8_t* outside[kMaxDims];
  float extrapolation;
  PIPETRAIN_HD void operator()(int64_t i) const {
    int64_t o[kMaxDims], t[kMaxDims];
    int64_t rest = i;
    for (int d = rank - 1; d >= 0; --d) {
      o[d] = rest % out_dims[d];
      rest /= out_dims[d];
      t[d] = 0;
      if (outside[d][o[d]]) {
        y[i] = extrapolation;
        return;
      }
    }
    double acc = 0.0;
    for (;;) {
      double w = 1.0;
      int64_t off = 0;
      for (int d = 0; d < rank; ++d) {
        const int64_t k = o[d] * taps[d] + t[d];
        w *= weight[d][k];
        off += index[d][k] * in_strides[d];
      }
      acc += w * static_cast<double>(x[off]);
      int d = rank - 1;
      while (d >= 0 && ++t[d] == taps[d]) t[d--] = 0;
      if (d < 0) break;
    }
    y[i] = static_cast<float>(acc);
  }
};

template <typename Exec>
void resize_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  if (y.numel() == 0) return;
  if (x.shape.size() > static_cast<size_t>(kMaxDims))
    throw UnsupportedOp(a.n().describe() + ": Resize of rank " + std::to_string(x.shape.size()) +
                        " (the device kernels index at most 8 dims)");
  const ResizePlan plan = resize_plan(*a.host, x.shape, y.shape);
  const std::vector<int64_t> st = contiguous_strides(x.shape);
  ResizeGather f{};
  f.x = x.data<float>();
  f.y = y.data<float>();
  f.rank = static_cast<int>(x.shape.size());
  f.extrapolation = static_cast<float>(plan.extrapolation);
  for (size_t d = 0; d < plan.axes.size(); ++d) {
    const ResizeAxis& ax = plan.axes[d];
    f.out_dims[d] = ax.out;
    f.in_strides[d] = st[d];
    f.taps[d] = ax.taps;
    f.index[d] = ex.upload(ax.index);
    f.weight[d] = ex.upload(ax.weight);
    f.outside[d] = ex.upload(ax.outside);
  }
  ex.for_each(y.numel(), f);
}

/// One axis's transpose: dst (outer, in, inner) element sums w * src (outer,
/// out, inner) over the (o, w) pairs that tapped its index.
struct ResizeAxisGrad {
  const float* src;
  float* dst;
  const int64_t *first, *from;  // CSR over input indices: output positions o
  const double* w;
  int64_t in, out, inner;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const int64_t r = i % inner, oj = i / inner, j = oj % in, outer = oj / in;
    double acc = 0.0;
    for (int64_t p = first[j]; p < first[j + 1]; ++p)
      acc += w[p] * static_cast<double>(src[(outer * out + from[p]) * inner + r]);
    dst[i] = static_cast<float>(acc);
  }
};

/// ResizeGrad (dY, roi, scales, sizes; Resize's attributes and input_shape): dX.
template <typename Exec>
void resize_grad_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &dy = a.in[0], &dx = a.out[0];
  if (dx.numel() == 0) return;
  const ResizePlan plan = resize_plan(*a.host, dx.shape, dy.shape);
  std::vector<size_t> moving;
  for (size_t d = 0; d < plan.axes.size(); ++d)
    if (!plan.axes[d].identity()) moving.push_back(d);
  if (moving.empty()) {
    copy_op(ex, a);
    return;
  }
  ir::Shape shape = dy.shape;
  const float* src = dy.data<float>();
  for (size_t k = 0; k < moving.size(); ++k) {
    const size_t d = moving[k];
    const ResizeAxis& ax = plan.axes[d];
    std::vector<int64_t> first(static_cast<size_t>(ax.in) + 1, 0);
    for (int64_t o = 0; o < ax.out; ++o)
      if (!ax.outside[static_cast<size_t>(o)])
        for (int64_t t = 0; t < ax.taps; ++t)
          ++first[static_cast<size_t>(ax.index[static_cast<size_t>(o * ax.taps + t)]) + 1];
    std::partial_sum(first.begin(), first.end(), first.begin());
    std::vector<int64_t> fill(first.begin(), first.end() - 1), from(first.back());
    std::vector<double> w(first.back());
    for (int64_t o = 0; o < ax.out; ++o)
      if (!ax.outside[static_cast<size_t>(o)])
        for (int64_t t = 0; t < ax.taps; ++t) {
          const size_t at = static_cast<size_t>(o * ax.taps + t);
          const size_t p = static_cast<size_t>(fill[static_cast<size_t>(ax.index[at])]++);
          from[p] = o;
          w[p] = ax.weight[at];
        }
    const int64_t inner =
        ir::numel(ir::Shape(shape.begin() + static_cast<long>(d) + 1, shape.end()));
    shape[d] = ax.in;
    float* dst =
        k + 1 == moving.size() ? dx.data<float>() : ex.template scratch<float>(ir::numel(shape));
    ex.for_each(ir::numel(shape),
                ResizeAxisGrad{src, dst, ex.upload(first), from.empty() ? nullptr : ex.upload(from),
                               w.empty() ? nullptr : ex.upload(w), ax.in, ax.out, inner});
    src = dst;
  }
}

}  // namespace pipetrain::exec::device
