// Import-time arithmetic for constant folding: binary and unary elementwise
// ops with numpy broadcasting, Where, Cast, ConstantOfShape and Range.
// Integers are computed in int64 with overflow checks (an overflow leaves the
// node to the kernel rather than folding a wrong value); f32 in float.
#include <cmath>
#include <cstring>
#include <limits>

#include "importer/fold_eval.h"

namespace pipetrain::importer::detail::fold {

using ir::DType;
using ir::Shape;
using ir::Tensor;

namespace {

bool is_int(DType t) {
  return t == DType::kI64 || t == DType::kI32;
}

// Stores v into element i; false when it does not fit the dtype.
bool put_int(Tensor& t, int64_t i, int64_t v) {
  switch (t.dtype()) {
    case DType::kI64: t.data<int64_t>()[i] = v; return true;
    case DType::kI32:
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        return false;
      t.data<int32_t>()[i] = static_cast<int32_t>(v);
      return true;
    case DType::kBool: t.data<uint8_t>()[i] = v != 0; return true;
    case DType::kF32: t.data<float>()[i] = static_cast<float>(v); return true;
    default: return false;
  }
}

std::optional<int64_t> int_op(const std::string& op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op == "Add") return __builtin_add_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (op == "Sub") return __builtin_sub_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (op == "Mul") return __builtin_mul_overflow(a, b, &r) ? std::nullopt : std::optional(r);
  if (op == "Div") {  // C semantics: truncation toward zero, like the kernels
    if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) return std::nullopt;
    return a / b;
  }
  if (op == "Equal") return a == b;
  if (op == "Less") return a < b;
  if (op == "Greater") return a > b;
  if (op == "Max") return std::max(a, b);
  if (op == "Min") return std::min(a, b);
  if (op == "Mod" ||
      op == "FMod") {  // the kernels' ModOp: the divisor's sign, or with fmod the dividend's
    if (b == 0 || b == -1) return b == 0 ? std::nullopt : std::optional<int64_t>(0);
    r = a % b;
    if (op == "Mod" && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
  return std::nullopt;
}

float float_op(const std::string& op, float a, float b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Equal") return a == b;
  if (op == "Less") return a < b;
  if (op == "Max" || op == "Min") {  // a NaN wins, as in the kernels
    if (a != a || b != b) return a != a ? a : b;
    return op == "Max" ? std::max(a, b) : std::min(a, b);
  }
  if (op == "Mod" || op == "FMod") {
    float r = std::fmod(a, b);
    if (op == "Mod" && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
  return a > b;  // Greater
}

}  // namespace

Result binary(const std::string& op, const Inputs& in) {
  if (in.size() != 2 || !in[0] || !in[1]) return std::nullopt;
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  const DType t = a.dtype();
  if (b.dtype() != t || !arithmetic_dtype(t)) return std::nullopt;
  const bool compare = op == "Equal" || op == "Less" || op == "Greater";
  if (t == DType::kBool && op != "Equal") return std::nullopt;
  auto shape = broadcast({a.shape(), b.shape()});
  if (!shape) return std::nullopt;
  auto out = make(compare ? DType::kBool : t, *shape);
  if (!out) return std::nullopt;
  auto ia = broadcast_offsets(a.shape(), *shape), ib = broadcast_offsets(b.shape(), *shape);
  for (int64_t i = 0; i < out->numel(); ++i) {
    const int64_t ja = ia[static_cast<size_t>(i)], jb = ib[static_cast<size_t>(i)];
    if (t == DType::kF32) {
      float r = float_op(op, a.data<float>()[ja], b.data<float>()[jb]);
      if (compare)
        out->data<uint8_t>()[i] = r != 0.0f;
      else
        out->data<float>()[i] = r;
    } else {
      auto r = int_op(op, get_int(a, ja), get_int(b, jb));
      if (!r || !put_int(*out, i, *r)) return std::nullopt;
    }
  }
  return out;
}

Result unary(const std::string& op, const Inputs& in) {
  if (in.size() != 1) return std::nullopt;
  const Tensor& x = *in[0];
  const DType t = x.dtype();
  if ((op == "Not") != (t == DType::kBool) || !arithmetic_dtype(t)) return std::nullopt;
  auto out = make(t, x.shape());
  if (!out) return std::nullopt;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (t == DType::kF32) {
      float v = x.data<float>()[i];
      out->data<float>()[i] = op == "Neg"     ? -v
                              : op == "Ceil"  ? std::ceil(v)
                              : op == "Floor" ? std::floor(v)
                              : op == "Relu"  ? (v > 0 ? v : (v != v ? v : 0.0f))
                                              : std::fabs(v);
    } else if (t == DType::kBool) {
      out->data<uint8_t>()[i] = x.data<uint8_t>()[i] == 0;
    } else {
      int64_t v = get_int(x, i);
      if (op == "Ceil" || op == "Floor" || op == "Relu") {  // integers: Relu clamps, the rest keep
        if (!put_int(*out, i, op == "Relu" && v < 0 ? 0 : v)) return std::nullopt;
        continue;
      }
      if (v == std::numeric_limits<int64_t>::min() ||
          !put_int(*out, i, v < 0 || op == "Neg" ? -v : v))
        return std::nullopt;
    }
  }
  return out;
}

Result where(const Inputs& in) {
  if (in.size() != 3 || !in[0] || !in[1] || !in[2]) return std::nullopt;
  const Tensor &c = *in[0], &x = *in[1], &y = *in[2];
  if (c.dtype() != DType::kBool || x.dtype() != y.dtype()) return std::nullopt;
  auto shape = broadcast({c.shape(), x.shape(), y.shape()});
  if (!shape) return std::nullopt;
  auto out = make(x.dtype(), *shape);
  if (!out) return std::nullopt;
  auto ic = broadcast_offsets(c.shape(), *shape), ix = broadcast_offsets(x.shape(), *shape),
       iy = broadcast_offsets(y.shape(), *shape);
  const size_t es = ir::dtype_size(x.dtype());
  for (size_t i = 0; i < static_cast<size_t>(out->numel()); ++i) {
    bool pick_x = c.data<uint8_t>()[ic[i]] != 0;
    const auto* src = static_cast<const std::byte*>(pick_x ? x.raw() : y.raw());
    std::memcpy(static_cast<std::byte*>(out->raw()) + i * es,
                src + static_cast<size_t>(pick_x ? ix[i] : iy[i]) * es, es);
  }
  return out;
}

Result cast(const ir::Node& n, const Inputs& in) {
  auto it = n.attrs.find("to");
  if (in.size() != 1 || it == n.attrs.end() || ir::attr_type(it->second) != ir::AttrType::kInt)
    return std::nullopt;
  for (const auto& [key, value] : n.attrs)
    if (key != "to") return std::nullopt;  // saturate etc.: leave it to the kernel
  const int64_t to_onnx = std::get<int64_t>(it->second);
  if (to_onnx < 0 || to_onnx > 64) return std::nullopt;
  const DType to = ir::dtype_from_onnx(static_cast<int>(to_onnx));
  const Tensor& x = *in[0];
  if (!arithmetic_dtype(to) || !arithmetic_dtype(x.dtype())) return std::nullopt;
  auto out = make(to, x.shape());
  if (!out) return std::nullopt;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (x.dtype() == DType::kF32) {
      float v = x.data<float>()[i];
      if (to == DType::kF32) {
        out->data<float>()[i] = v;
      } else if (to == DType::kBool) {
        out->data<uint8_t>()[i] = v != 0.0f;
      } else {
        // Float -> int truncates toward zero; NaN or out of range is not folded.
        if (!(std::fabs(v) < 9.2e18f)) return std::nullopt;
        if (!put_int(*out, i, static_cast<int64_t>(v))) return std::nullopt;
      }
    } else {
      int64_t v = get_int(x, i);
      if (to == DType::kI32) {
        out->data<int32_t>()[i] = static_cast<int32_t>(v);  // wraps, as numpy does
      } else {
        put_int(*out, i, v);
      }
    }
  }
  return out;
}

Result constant_of_shape(const ir::Node& n, const Inputs& in) {
  if (in.size() != 1 || in[0]->dtype() != DType::kI64 || in[0]->rank() != 1) return std::nullopt;
  Tensor value = Tensor::scalar_f32(0.0f);
  for (const auto& [key, attr] : n.attrs) {
    if (key != "value" || ir::attr_type(attr) != ir::AttrType::kTensor) return std::nullopt;
    value = std::get<Tensor>(attr);
  }
  if (value.numel() != 1 || !value.defined()) return std::nullopt;
  Shape shape = in[0]->to_i64();
  auto out = make(value.dtype(), shape);
  if (!out) return std::nullopt;
  const size_t es = ir::dtype_size(value.dtype());
  for (size_t i = 0; i < static_cast<size_t>(out->numel()); ++i)
    std::memcpy(static_cast<std::byte*>(out->raw()) + i * es, value.raw(), es);
  return out;
}

// Range: n = max(ceil((limit - start) / delta), 0) elements start, start +
// delta, ... accumulated like the reference (value += delta).
Result range(const Inputs& in) {
  if (in.size() != 3 || !in[1] || !in[2]) return std::nullopt;
  const DType t = in[0]->dtype();
  for (const Tensor* x : in)
    if (x->dtype() != t || x->numel() != 1 || x->rank() > 1) return std::nullopt;
  if (t == DType::kF32) {
    float start = in[0]->data<float>()[0], limit = in[1]->data<float>()[0],
          delta = in[2]->data<float>()[0];
    if (delta == 0.0f || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta))
      return std::nullopt;
    double count = std::ceil(static_cast<double>(limit - start) / delta);
    if (count > static_cast<double>(kMaxFoldBytes)) return std::nullopt;
    auto out = make(t, {std::max<int64_t>(static_cast<int64_t>(count), 0)});
    if (!out) return std::nullopt;
    float v = start;
    for (int64_t i = 0; i < out->numel(); ++i, v += delta) out->data<float>()[i] = v;
    return out;
  }
  if (!is_int(t)) return std::nullopt;
  const int64_t start = get_int(*in[0], 0), limit = get_int(*in[1], 0), delta = get_int(*in[2], 0);
  if (delta == 0) return std::nullopt;
  // Exact ceil division in 128 bits: limit - start may overflow int64.
  const __int128 diff = static_cast<__int128>(limit) - start;
  __int128 count = 0;
  if ((diff > 0 && delta > 0) || (diff < 0 && delta < 0)) {
    __int128 d = delta > 0 ? delta : -static_cast<__int128>(delta);
    __int128 m = diff > 0 ? diff : -diff;
    count = (m + d - 1) / d;
  }
  if (count > kMaxFoldBytes) return std::nullopt;
  auto out = make(t, {static_cast<int64_t>(count)});
  if (!out) return std::nullopt;
  for (int64_t i = 0; i < out->numel(); ++i) {
    int64_t step = 0, v = 0;
    if (__builtin_mul_overflow(i, delta, &step) || __builtin_add_overflow(start, step, &v) ||
        !put_int(*out, i, v))
      return std::nullopt;
  }
  return out;
}

}  // namespace pipetrain::importer::detail::fold
