#include "ir/ops/data_movement.h"

#include <algorithm>
#include <string>

namespace pipetrain::ir {

namespace {

std::string ints_str(const std::vector<int64_t>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "]";
}

/// Normalises axes against rank, rejecting out-of-range and repeated ones.
std::vector<int64_t> unique_axes(const std::vector<int64_t>& axes, int64_t rank,
                                 const Shape& shape) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank)
      throw ModelError("axis " + std::to_string(a) + " is out of range for input " +
                       shape_str(shape));
    if (seen[static_cast<size_t>(n)])
      throw ModelError("axes " + ints_str(axes) + " repeat an axis");
    seen[static_cast<size_t>(n)] = true;
    out.push_back(n);
  }
  return out;
}

}  // namespace

SliceSpec resolve_slice(const Shape& in, const std::vector<int64_t>& starts,
                        const std::vector<int64_t>& ends, const std::vector<int64_t>& axes_in,
                        const std::vector<int64_t>& steps) {
  const int64_t rank = static_cast<int64_t>(in.size());
  if (starts.size() != ends.size())
    throw ModelError("starts " + ints_str(starts) + " and ends " + ints_str(ends) +
                     " differ in length");
  std::vector<int64_t> axes = axes_in;
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (axes.size() != starts.size())
    throw ModelError("axes " + ints_str(axes_in) + " and starts " + ints_str(starts) +
                     " differ in length");
  if (!steps.empty() && steps.size() != starts.size())
    throw ModelError("steps " + ints_str(steps) + " and starts " + ints_str(starts) +
                     " differ in length");
  axes = unique_axes(axes, rank, in);

  SliceSpec s;
  s.out = in;
  s.start.assign(in.size(), 0);
  s.step.assign(in.size(), 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    const int64_t dim = in[a];
    const int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0) throw ModelError("steps " + ints_str(steps) + " contain 0");
    int64_t start = starts[i], end = ends[i];
    // INT64_MIN / INT64_MAX ("to the end") stay in range after adding dim >= 0.
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t count;
    if (dim == 0) {
      count = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
    }
    s.out[a] = count;
    s.start[a] = count > 0 ? start : 0;
    s.step[a] = step;
  }
  return s;
}

PadMode pad_mode_from_string(const std::string& mode) {
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "edge") return PadMode::kEdge;
  if (mode == "wrap") return PadMode::kWrap;
  throw UnsupportedOp("mode '" + mode + "' is not supported (constant, reflect, edge, wrap)");
}

PadSpec resolve_pads(const Shape& in, const std::vector<int64_t>& pads,
                     const std::vector<int64_t>& axes_in, PadMode mode) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes = axes_in;
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  else
    axes = unique_axes(axes, rank, in);
  if (pads.size() != 2 * axes.size())
    throw ModelError("pads " + ints_str(pads) + " must have 2 * " + std::to_string(axes.size()) +
                     " values for input " + shape_str(in));
  PadSpec s;
  s.out = in;
  s.begin.assign(in.size(), 0);
  s.end.assign(in.size(), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    s.begin[a] = pads[i];
    s.end[a] = pads[i + axes.size()];
    s.out[a] = in[a] + s.begin[a] + s.end[a];
    if (s.out[a] < 0)
      throw ModelError("pads " + ints_str(pads) + " crop axis " + std::to_string(a) + " of input " +
                       shape_str(in) + " below zero");
    if (mode != PadMode::kConstant && in[a] == 0 && s.out[a] > 0)
      throw ModelError("cannot pad the empty axis " + std::to_string(a) + " of input " +
                       shape_str(in) + " in a non-constant mode");
  }
  return s;
}

int64_t pad_source_index(int64_t p, int64_t n, PadMode mode) {
  if (p >= 0 && p < n) return p;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return p < 0 ? 0 : n - 1;
    case PadMode::kWrap: return ((p % n) + n) % n;
    case PadMode::kReflect: {
      if (n == 1) return 0;
      // Mirror image sequence 0, 1, ..., n-1, n-2, ..., 1 repeats with period 2(n-1).
      const int64_t period = 2 * (n - 1);
      int64_t m = ((p % period) + period) % period;
      return m < n ? m : period - m;
    }
  }
  return -1;
}

std::pair<int64_t, int64_t> shape_op_range(int64_t rank, int64_t start, int64_t end) {
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {start, std::max(start, end)};
}

Tensor constant_node_value(const Node& n) {
  int count = 0;
  for (const char* key : {"value", "value_float", "value_floats", "value_int", "value_ints"})
    count += n.has_attr(key) ? 1 : 0;
  if (count != 1)
    throw ModelError(
        "needs exactly one of the attributes value, value_float, value_floats, value_int, "
        "value_ints (has " +
        std::to_string(count) + ")");
  if (n.has_attr("value")) return n.attr_tensor("value");
  if (n.has_attr("value_float")) return Tensor::scalar_f32(n.attr_float("value_float", 0.f));
  if (n.has_attr("value_floats")) {
    std::vector<float> v = n.attr_floats("value_floats");
    return Tensor::from_f32(v, {static_cast<int64_t>(v.size())});
  }
  if (n.has_attr("value_int")) return Tensor::from_i64({n.attr_int("value_int", 0)}, {});
  std::vector<int64_t> v = n.attr_ints("value_ints");
  return Tensor::from_i64(v, {static_cast<int64_t>(v.size())});
}

Tensor constant_of_shape_value(const Node& n) {
  if (!n.has_attr("value")) return Tensor::scalar_f32(0.f);
  const Tensor& v = n.attr_tensor("value");
  if (v.numel() != 1)
    throw ModelError("attribute 'value' must hold one element, has shape " + shape_str(v.shape()));
  return v;
}

}  // namespace pipetrain::ir
