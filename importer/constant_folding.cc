// Constant folding: which nodes fold (every input a kConstant value, or a
// Shape whose input's static shape is known), the shared evaluator helpers,
// and the data-movement ops. Parameters never fold: they change in training.
#include <cstring>

#include "importer/fold_eval.h"
#include "importer/internal.h"

namespace pipetrain::importer::detail {

namespace fold {

using ir::DType;
using ir::Shape;
using ir::Tensor;

Result make(DType dtype, const Shape& shape) {
  int64_t bytes = static_cast<int64_t>(ir::dtype_size(dtype));
  if (bytes == 0) return std::nullopt;
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && bytes > kMaxFoldBytes / d)) return std::nullopt;
    bytes *= d;
  }
  return Tensor(dtype, shape);
}

bool arithmetic_dtype(DType t) {
  return t == DType::kF32 || t == DType::kI64 || t == DType::kI32 || t == DType::kBool;
}

int64_t get_int(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kI64: return t.data<int64_t>()[i];
    case DType::kI32: return t.data<int32_t>()[i];
    case DType::kBool: return t.data<uint8_t>()[i] != 0;
    default: return static_cast<int64_t>(t.at(i));
  }
}

double get_real(const Tensor& t, int64_t i) {
  return t.at(i);
}

std::optional<Shape> broadcast(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes)
    for (size_t k = 0; k < s.size(); ++k) {
      int64_t& o = out[rank - s.size() + k];
      int64_t d = s[k];
      if (d == o || d == 1) continue;
      if (o != 1) return std::nullopt;
      o = d;
    }
  return out;
}

std::vector<int64_t> broadcast_offsets(const Shape& in, const Shape& out) {
  const size_t rank = out.size();
  // Stride of each output axis in the input: 0 where the input broadcasts.
  std::vector<int64_t> stride(rank, 0);
  int64_t s = 1;
  for (size_t k = in.size(); k-- > 0;) {
    stride[rank - in.size() + k] = in[k] == 1 ? 0 : s;
    s *= in[k];
  }
  std::vector<int64_t> offsets(static_cast<size_t>(ir::numel(out)));
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (auto& o : offsets) {
    o = off;
    for (size_t k = rank; k-- > 0;) {  // odometer increment, updating the offset
      off += stride[k];
      if (++idx[k] < out[k]) break;
      off -= stride[k] * idx[k];
      idx[k] = 0;
    }
  }
  return offsets;
}

std::optional<int64_t> axis_in(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

std::optional<std::vector<int64_t>> ints_from(const ir::Node& n, const Inputs& in, size_t i,
                                              const std::string& key) {
  if (i < in.size() && in[i]) {
    DType t = in[i]->dtype();
    if (t != DType::kI64 && t != DType::kI32) return std::nullopt;
    return in[i]->to_i64();
  }
  auto it = n.attrs.find(key);
  if (it == n.attrs.end() || ir::attr_type(it->second) != ir::AttrType::kInts) return std::nullopt;
  return std::get<std::vector<int64_t>>(it->second);
}

namespace {

int64_t int_attr(const ir::Node& n, const std::string& key, int64_t dflt, bool* ok) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return dflt;
  if (ir::attr_type(it->second) != ir::AttrType::kInt) *ok = false;
  return *ok ? std::get<int64_t>(it->second) : dflt;
}

// Copies element `from` of `src` to element `to` of `dst` (same dtype).
inline void copy_elem(const Tensor& src, int64_t from, Tensor& dst, int64_t to) {
  size_t es = ir::dtype_size(src.dtype());
  std::memcpy(static_cast<std::byte*>(dst.raw()) + to * es,
              static_cast<const std::byte*>(src.raw()) + from * es, es);
}

}  // namespace

Result reshape(const ir::Node& n, const Inputs& in) {
  bool ok = true;
  bool allow_zero = int_attr(n, "allowzero", 0, &ok) != 0;
  if (!ok || in.size() < 2 || !in[1]) return std::nullopt;
  auto spec = ints_from(n, in, 1, "");
  if (!spec) return std::nullopt;
  const Shape& from = in[0]->shape();
  Shape to;
  int64_t known = 1, infer_at = -1;
  for (size_t k = 0; k < spec->size(); ++k) {
    int64_t d = (*spec)[k];
    if (d == 0 && !allow_zero) {
      if (k >= from.size()) return std::nullopt;
      d = from[k];
    }
    if (d == -1) {
      if (infer_at >= 0) return std::nullopt;
      infer_at = static_cast<int64_t>(k);
      d = 1;
    } else if (d < 0) {
      return std::nullopt;
    }
    to.push_back(d);
    if (d != 0 && known > (int64_t{1} << 62) / d) return std::nullopt;
    known *= d;
  }
  const int64_t total = in[0]->numel();
  if (infer_at >= 0) {
    if (known == 0 || total % known) return std::nullopt;
    to[static_cast<size_t>(infer_at)] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return in[0]->clone().reshaped(to);
}

Result unsqueeze(const ir::Node& n, const Inputs& in) {
  auto axes = ints_from(n, in, 1, "axes");
  if (!axes) return std::nullopt;
  const Shape& s = in[0]->shape();
  const int64_t rank = static_cast<int64_t>(s.size() + axes->size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : *axes) {
    auto k = axis_in(a, rank);
    if (!k || inserted[static_cast<size_t>(*k)]) return std::nullopt;
    inserted[static_cast<size_t>(*k)] = true;
  }
  Shape out;
  size_t next = 0;
  for (int64_t k = 0; k < rank; ++k)
    out.push_back(inserted[static_cast<size_t>(k)] ? 1 : s[next++]);
  return in[0]->clone().reshaped(out);
}

Result squeeze(const ir::Node& n, const Inputs& in) {
  const Shape& s = in[0]->shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  std::vector<bool> drop(s.size(), false);
  auto axes = ints_from(n, in, 1, "axes");
  if (axes) {
    for (int64_t a : *axes) {
      auto k = axis_in(a, rank);
      if (!k || s[static_cast<size_t>(*k)] != 1) return std::nullopt;
      drop[static_cast<size_t>(*k)] = true;
    }
  } else if ((in.size() > 1 && in[1]) || n.has_attr("axes")) {
    return std::nullopt;  // axes present but not an integer list
  } else {
    for (size_t k = 0; k < s.size(); ++k) drop[k] = s[k] == 1;
  }
  Shape out;
  for (size_t k = 0; k < s.size(); ++k)
    if (!drop[k]) out.push_back(s[k]);
  return in[0]->clone().reshaped(out);
}

Result gather(const ir::Node& n, const Inputs& in) {
  bool ok = true;
  int64_t axis_attr = int_attr(n, "axis", 0, &ok);
  if (!ok || in.size() < 2 || !in[1]) return std::nullopt;
  const Tensor& data = *in[0];
  const Tensor& idx = *in[1];
  if (idx.dtype() != DType::kI64 && idx.dtype() != DType::kI32) return std::nullopt;
  const Shape& ds = data.shape();
  auto axis = axis_in(axis_attr, static_cast<int64_t>(ds.size()));
  if (!axis) return std::nullopt;
  const size_t a = static_cast<size_t>(*axis);
  Shape out(ds.begin(), ds.begin() + static_cast<std::ptrdiff_t>(a));
  out.insert(out.end(), idx.shape().begin(), idx.shape().end());
  out.insert(out.end(), ds.begin() + static_cast<std::ptrdiff_t>(a) + 1, ds.end());
  auto result = make(data.dtype(), out);
  if (!result) return std::nullopt;
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < a; ++k) outer *= ds[k];
  for (size_t k = a + 1; k < ds.size(); ++k) inner *= ds[k];
  const int64_t dim = ds[a], count = idx.numel();
  const size_t chunk = static_cast<size_t>(inner) * ir::dtype_size(data.dtype());
  auto* dst = static_cast<std::byte*>(result->raw());
  const auto* src = static_cast<const std::byte*>(data.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      int64_t i = get_int(idx, j);
      if (i < 0) i += dim;
      if (i < 0 || i >= dim) return std::nullopt;
      std::memcpy(dst + static_cast<size_t>(o * count + j) * chunk,
                  src + static_cast<size_t>(o * dim + i) * chunk, chunk);
    }
  return result;
}

Result concat(const ir::Node& n, const Inputs& in) {
  bool ok = true;
  int64_t axis_attr = int_attr(n, "axis", 0, &ok);
  if (!ok || !n.has_attr("axis") || in.empty()) return std::nullopt;
  const Shape& first = in[0]->shape();
  auto axis = axis_in(axis_attr, static_cast<int64_t>(first.size()));
  if (!axis) return std::nullopt;
  const size_t a = static_cast<size_t>(*axis);
  Shape out = first;
  out[a] = 0;
  for (const Tensor* t : in) {
    if (!t || t->dtype() != in[0]->dtype() || t->shape().size() != first.size())
      return std::nullopt;
    for (size_t k = 0; k < first.size(); ++k)
      if (k != a && t->shape()[k] != first[k]) return std::nullopt;
    out[a] += t->shape()[a];
  }
  auto result = make(in[0]->dtype(), out);
  if (!result) return std::nullopt;
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < a; ++k) outer *= first[k];
  for (size_t k = a + 1; k < first.size(); ++k) inner *= first[k];
  const size_t es = ir::dtype_size(in[0]->dtype());
  auto* dst = static_cast<std::byte*>(result->raw());
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor* t : in) {
      size_t chunk = static_cast<size_t>(t->shape()[a] * inner) * es;
      std::memcpy(dst, static_cast<const std::byte*>(t->raw()) + static_cast<size_t>(o) * chunk,
                  chunk);
      dst += chunk;
    }
  return result;
}

Result slice(const Inputs& in) {
  if (in.size() < 3 || !in[1] || !in[2]) return std::nullopt;
  ir::Node none;
  auto starts = ints_from(none, in, 1, ""), ends = ints_from(none, in, 2, "");
  if (!starts || !ends || starts->size() != ends->size()) return std::nullopt;
  const Tensor& data = *in[0];
  const Shape& s = data.shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  std::vector<int64_t> axes, steps(starts->size(), 1);
  if (in.size() > 3 && in[3]) {
    auto given = ints_from(none, in, 3, "");
    if (!given || given->size() != starts->size()) return std::nullopt;
    axes = *given;
  } else {
    for (size_t k = 0; k < starts->size(); ++k) axes.push_back(static_cast<int64_t>(k));
  }
  if (in.size() > 4 && in[4]) {
    auto given = ints_from(none, in, 4, "");
    if (!given || given->size() != starts->size()) return std::nullopt;
    steps = *given;
  }
  std::vector<int64_t> first(s.size(), 0), step(s.size(), 1);
  Shape out = s;
  std::vector<bool> seen(s.size(), false);
  for (size_t k = 0; k < axes.size(); ++k) {
    auto ax = axis_in(axes[k], rank);
    if (!ax || seen[static_cast<size_t>(*ax)] || steps[k] == 0) return std::nullopt;
    const size_t a = static_cast<size_t>(*ax);
    seen[a] = true;
    const int64_t dim = s[a], st = steps[k];
    step[a] = st;
    if (dim == 0) {
      out[a] = 0;
      continue;
    }
    // ONNX Slice: negative indices count from the end, then clamp to
    // [0, dim] for positive steps and [-1, dim-1] for negative ones.
    int64_t b = (*starts)[k], e = (*ends)[k];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      out[a] = e > b ? (e - b + st - 1) / st : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      out[a] = b > e ? (b - e - st - 1) / -st : 0;
    }
    first[a] = b;
  }
  auto result = make(data.dtype(), out);
  if (!result) return std::nullopt;
  auto strides = ir::strides_of(s);
  std::vector<int64_t> idx(s.size(), 0);
  for (int64_t o = 0; o < result->numel(); ++o) {
    int64_t from = 0;
    for (size_t k = 0; k < s.size(); ++k) from += (first[k] + idx[k] * step[k]) * strides[k];
    copy_elem(data, from, *result, o);
    for (size_t k = s.size(); k-- > 0;) {
      if (++idx[k] < out[k]) break;
      idx[k] = 0;
    }
  }
  return result;
}

Result expand(const Inputs& in) {
  if (in.size() < 2 || !in[1]) return std::nullopt;
  ir::Node none;
  auto shape = ints_from(none, in, 1, "");
  if (!shape) return std::nullopt;
  for (int64_t d : *shape)
    if (d < 0) return std::nullopt;
  auto out = broadcast({in[0]->shape(), *shape});
  if (!out) return std::nullopt;
  auto result = make(in[0]->dtype(), *out);
  if (!result) return std::nullopt;
  auto offsets = broadcast_offsets(in[0]->shape(), *out);
  for (int64_t o = 0; o < result->numel(); ++o)
    copy_elem(*in[0], offsets[static_cast<size_t>(o)], *result, o);
  return result;
}

// perm (default: reversed axes) applied to any dtype.
Result transpose(const ir::Node& n, const Inputs& in) {
  if (in.empty() || !in[0]) return std::nullopt;
  const ir::Shape& x = in[0]->shape();
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
  if (static_cast<int64_t>(perm.size()) != rank) return std::nullopt;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  ir::Shape out_shape(x.size());
  for (int64_t d = 0; d < rank; ++d) {
    auto a = axis_in(perm[d], rank);
    if (!a || seen[*a]) return std::nullopt;
    seen[*a] = true;
    perm[d] = *a;
    out_shape[d] = x[*a];
  }
  auto result = make(in[0]->dtype(), out_shape);
  if (!result) return std::nullopt;
  std::vector<int64_t> in_stride(x.size(), 1);
  for (int64_t d = rank - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * x[d + 1];
  std::vector<int64_t> index(x.size(), 0);
  for (int64_t o = 0; o < result->numel(); ++o) {
    int64_t src = 0;
    for (int64_t d = 0; d < rank; ++d) src += index[d] * in_stride[perm[d]];
    copy_elem(*in[0], src, *result, o);
    for (int64_t d = rank - 1; d >= 0 && ++index[d] == out_shape[d]; --d) index[d] = 0;
  }
  return result;
}

}  // namespace fold

namespace {

// Shape(x)[start:end] (start/end attributes from opset 15, clamped like a slice).
std::optional<ir::Tensor> fold_shape(const ir::Graph& g, const ir::Node& n) {
  if (!n.has_input(0) || !g.has_tensor(n.inputs[0])) return std::nullopt;
  const ir::TensorDesc& d = g.tensor(n.inputs[0]);
  if (d.dtype == ir::DType::kUndefined) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(d.shape.size());
  int64_t start = 0, end = rank;
  for (const auto& [key, value] : n.attrs) {
    if (ir::attr_type(value) != ir::AttrType::kInt || (key != "start" && key != "end"))
      return std::nullopt;
    (key == "start" ? start : end) = std::get<int64_t>(value);
  }
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t k = start; k < end; ++k) dims.push_back(d.shape[static_cast<size_t>(k)]);
  for (int64_t dim : dims)
    if (dim < 0) return std::nullopt;
  return ir::Tensor::from_i64(dims, {static_cast<int64_t>(dims.size())});
}

std::optional<ir::Tensor> evaluate(const ir::Node& n, const fold::Inputs& in) {
  const std::string& op = n.op_type;
  if (in.empty() || !in[0]) return std::nullopt;
  if (op == "Identity") return in[0]->clone();
  if (op == "Reshape") return fold::reshape(n, in);
  if (op == "Unsqueeze") return fold::unsqueeze(n, in);
  if (op == "Squeeze") return fold::squeeze(n, in);
  if (op == "Gather") return fold::gather(n, in);
  if (op == "Concat") return fold::concat(n, in);
  if (op == "Slice") return fold::slice(in);
  if (op == "Transpose") return fold::transpose(n, in);
  if (op == "Expand") return fold::expand(in);
  if (op == "Cast") return fold::cast(n, in);
  if (op == "Where") return fold::where(in);
  if (op == "ConstantOfShape") return fold::constant_of_shape(n, in);
  if (op == "Range") return fold::range(in);
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal" || op == "Less" ||
      op == "Greater")
    return n.attrs.empty() ? fold::binary(op, in) : std::nullopt;
  if ((op == "Max" || op == "Min") && in.size() == 2) return fold::binary(op, in);
  if (op == "Mod")  // "FMod": fold_math's name for fmod = 1
    return fold::binary(n.attr_int("fmod", 0) != 0 ? "FMod" : "Mod", in);
  if (op == "Neg" || op == "Not" || op == "Abs" || op == "Ceil" || op == "Floor" || op == "Relu")
    return n.attrs.empty() ? fold::unary(op, in) : std::nullopt;
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<ir::Tensor>> fold_node(const ir::Graph& g, const ir::Node& n) {
  if (n.outputs.size() != 1 || n.outputs[0].empty()) return std::nullopt;
  if (n.op_type == "Size" && n.has_input(0) && g.has_tensor(n.inputs[0])) {
    const ir::TensorDesc& d = g.tensor(n.inputs[0]);
    for (int64_t dim : d.shape)
      if (dim < 0) return std::nullopt;
    if (d.dtype == ir::DType::kUndefined) return std::nullopt;
    return std::vector<ir::Tensor>{ir::Tensor::from_i64({ir::numel(d.shape)}, {})};
  }
  if (n.op_type == "Shape") {
    auto t = fold_shape(g, n);
    if (!t) return std::nullopt;
    return std::vector<ir::Tensor>{std::move(*t)};
  }
  fold::Inputs in;
  for (const auto& name : n.inputs) {
    if (name.empty()) {
      in.push_back(nullptr);
      continue;
    }
    const ir::Tensor* v = g.value(name);
    if (!v || g.tensor(name).role != ir::Role::kConstant) return std::nullopt;
    in.push_back(v);
  }
  // Trailing absent optionals are as if not given.
  while (!in.empty() && !in.back()) in.pop_back();
  std::optional<ir::Tensor> t;
  try {
    t = evaluate(n, in);
  } catch (const std::exception&) {
    return std::nullopt;  // let the shape rule explain what is wrong
  }
  if (!t) return std::nullopt;
  return std::vector<ir::Tensor>{std::move(*t)};
}

}  // namespace pipetrain::importer::detail
