// Narrow integer types (int8, int16, uint8-uint64) and the quantisation ops.
// The IR computes int8-int16 and uint8-uint16 in i32 and uint32-uint64 in
// i64 (tensor_proto.cc widens the file's tensors and writes them back in its
// width): a Cast to a narrow type wraps into its range as the narrow type
// would, the quantisation ops saturate into their 8-bit range, and BitShift
// wraps at its width. Arithmetic on narrow values elsewhere runs in the wider
// type (no wrap at 8 or 16 bits). The quantisation ops compute their integer
// products in float32, which is exact while a sum of products stays below
// 2^24 (an 8-bit MatMulInteger with K <= 258).
#include <cmath>

#include "importer/expansion_builder.h"
#include "importer/internal.h"
#include "importer/op_expansions.h"

namespace pipetrain::importer::detail {

namespace {

using Builder = ExpansionBuilder;
using ir::Attribute;
using ir::DType;

/// The file's element type of input i, recorded at import (kFileDtypeAttr + i);
/// `fallback` where the file does not say.
int32_t file_dtype(const ir::Node& n, size_t i, int32_t fallback) {
  const std::string key = kFileDtypeAttr + std::to_string(i);
  return n.has_attr(key) ? static_cast<int32_t>(n.attr_int(key, fallback)) : fallback;
}

std::string int_scalar(Builder& b, DType t, int64_t v) {
  ir::Tensor s(t, {});
  if (t == DType::kI32)
    s.data<int32_t>()[0] = static_cast<int32_t>(v);
  else
    s.data<int64_t>()[0] = v;
  return b.constant(std::move(s));
}

/// x (already in its wide IR type `t`) wrapped into the range of ONNX type
/// `narrow`, written to `out`: two's complement truncation, as a C cast does.
void wrap(Builder& b, const std::string& x, DType t, int32_t narrow, const std::string& out) {
  const int bits = 8 * narrow_int_bytes(narrow);
  if (bits == 0 || bits == 64) {
    b.op("Identity", {x}, {}, out);
    return;
  }
  const std::string modulus = int_scalar(b, t, int64_t{1} << bits);
  if (is_unsigned_int(narrow)) {  // Mod with fmod 0 takes the divisor's sign: [0, 2^bits)
    b.op("Mod", {x, modulus}, {}, out);
    return;
  }
  const std::string half = int_scalar(b, t, int64_t{1} << (bits - 1));
  b.op("Sub", {b.op("Mod", {b.op("Add", {x, half}), modulus}), half}, {}, out);
}

/// The 8-bit range a quantised output saturates to.
std::pair<float, float> saturation(Builder& b, int32_t type) {
  if (type == onnx::TensorProto::UINT8) return {0.f, 255.f};
  if (type == onnx::TensorProto::INT8) return {-128.f, 127.f};
  b.fail("quantised type " + onnx_dtype_name(type) + " (uint8 or int8)");
}

std::string to_float(Builder& b, const std::string& x) {
  if (b.graph().tensor(x).dtype == DType::kF32) return x;
  return b.op("Cast", {x}, {{"to", Attribute(int64_t{onnx::TensorProto::FLOAT})}});
}

/// A scale or zero point of input i as a float broadcastable against an
/// operand of `rank` dims: a scalar as is, a 1-D per-axis one reshaped to
/// lie along `axis`. Absent (optional zero point): "".
std::string per_axis(Builder& b, const ir::Node& n, size_t i, size_t rank, int64_t axis) {
  if (!n.has_input(i)) return "";
  const ir::Shape& s = b.shape(i);
  const std::string v = to_float(b, n.inputs[i]);
  if (ir::numel(s) == 1 || s.empty()) return v;
  if (s.size() != 1)
    b.fail("input " + std::to_string(i) + " " + ir::shape_str(s) + " is not a scalar or 1-D");
  if (axis < 0) axis += static_cast<int64_t>(rank);
  if (axis < 0 || axis >= static_cast<int64_t>(rank))
    b.fail("axis out of range for rank " + std::to_string(rank));
  std::vector<int64_t> shape(rank, 1);
  shape[static_cast<size_t>(axis)] = s[0];
  return b.op("Reshape", {v, b.ints(shape)});
}

/// round-half-even(v) + zp, saturated to `type`'s range, as the wide integer, into `out`.
void quantise(Builder& b, std::string v, const std::string& zp, int32_t type,
              const std::string& out) {
  const auto [lo, hi] = saturation(b, type);
  v = b.op("Round", {v});
  if (!zp.empty()) v = b.op("Add", {v, zp});
  v = b.op("Min", {b.op("Max", {v, b.scalar(lo)}), b.scalar(hi)});
  b.op("Cast", {v}, {{"to", Attribute(int64_t{onnx::TensorProto::INT32})}}, out);
}

std::vector<ir::Node> quantize_linear(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const size_t rank = b.shape(0).size();
  const int64_t axis = n.attr_int("axis", 1);
  const std::string x = to_float(b, n.inputs[0]);
  const std::string scaled = b.op("Div", {x, per_axis(b, n, 1, rank, axis)});
  quantise(b, scaled, per_axis(b, n, 2, rank, axis), file_dtype(n, 2, onnx::TensorProto::UINT8),
           n.outputs[0]);
  return std::move(b.nodes);
}

std::vector<ir::Node> dequantize_linear(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const size_t rank = b.shape(0).size();
  const int64_t axis = n.attr_int("axis", 1);
  std::string x = to_float(b, n.inputs[0]);
  if (const std::string zp = per_axis(b, n, 2, rank, axis); !zp.empty()) x = b.op("Sub", {x, zp});
  b.op("Mul", {x, per_axis(b, n, 1, rank, axis)}, {}, n.outputs[0]);
  return std::move(b.nodes);
}

// The specification's function: the range of x widened to include 0 maps onto [0, 255].
std::vector<ir::Node> dynamic_quantize_linear(ir::Graph& g, const ir::Node& n,
                                              std::set<std::string>& t) {
  Builder b(g, n, t);
  const std::string x = n.inputs[0], zero = b.scalar(0.f);
  const Attribute flat(int64_t{0});
  const std::string lo = b.op("Min", {b.op("ReduceMin", {x}, {{"keepdims", flat}}), zero});
  const std::string hi = b.op("Max", {b.op("ReduceMax", {x}, {{"keepdims", flat}}), zero});
  const std::string scale = b.op("Div", {b.op("Sub", {hi, lo}), b.scalar(255.f)}, {}, n.outputs[1]);
  const std::string zp_float =
      b.op("Round", {b.op("Min", {b.op("Max", {b.op("Neg", {b.op("Div", {lo, scale})}), zero}),
                                  b.scalar(255.f)})});
  b.op("Cast", {zp_float}, {{"to", Attribute(int64_t{onnx::TensorProto::INT32})}}, n.outputs[2]);
  quantise(b, b.op("Div", {x, scale}), zp_float, onnx::TensorProto::UINT8, n.outputs[0]);
  return std::move(b.nodes);
}

/// x - zp in float (zp optional, per row of a 2-D A when 1-D: `axis`).
std::string centred(Builder& b, const ir::Node& n, size_t x, size_t zp, int64_t axis) {
  const std::string v = to_float(b, n.inputs[x]);
  const std::string z = per_axis(b, n, zp, b.shape(x).size(), axis);
  return z.empty() ? v : b.op("Sub", {v, z});
}

std::map<std::string, Attribute> conv_attrs(const ir::Node& n) {
  std::map<std::string, Attribute> attrs;
  for (const char* key : {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})
    if (n.has_attr(key)) attrs[key] = n.attrs.at(key);
  return attrs;
}

// (A - a_zp) @ (B - b_zp) as int32: a 1-D a_zp is per row of A, a 1-D b_zp per column of B.
std::vector<ir::Node> matmul_integer(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const std::string y = b.op("MatMul", {centred(b, n, 0, 2, -2), centred(b, n, 1, 3, -1)});
  b.op("Cast", {y}, {{"to", Attribute(int64_t{onnx::TensorProto::INT32})}}, n.outputs[0]);
  return std::move(b.nodes);
}

// Conv(x - x_zp, w - w_zp) as int32: a 1-D w_zp is per output channel.
std::vector<ir::Node> conv_integer(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const std::string y =
      b.op("Conv", {centred(b, n, 0, 2, 1), centred(b, n, 1, 3, 0)}, conv_attrs(n));
  b.op("Cast", {y}, {{"to", Attribute(int64_t{onnx::TensorProto::INT32})}}, n.outputs[0]);
  return std::move(b.nodes);
}

/// y = saturate(round(acc * a_scale * b_scale / y_scale) + y_zp) into n's output.
void requantise(Builder& b, const ir::Node& n, const std::string& acc, const std::string& a_scale,
                const std::string& b_scale, size_t y_scale, size_t y_zp, size_t rank,
                int64_t axis) {
  const std::string multiplier =
      b.op("Div", {b.op("Mul", {a_scale, b_scale}), per_axis(b, n, y_scale, rank, axis)});
  quantise(b, b.op("Mul", {acc, multiplier}), per_axis(b, n, y_zp, rank, axis),
           file_dtype(n, y_zp, onnx::TensorProto::UINT8), n.outputs[0]);
}

// Inputs: a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp; per-row a and per-column b scales.
std::vector<ir::Node> qlinear_matmul(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const size_t rank = std::max(b.shape(0).size(), b.shape(3).size());
  const std::string acc = b.op("MatMul", {centred(b, n, 0, 2, -2), centred(b, n, 3, 5, -1)});
  requantise(b, n, acc, per_axis(b, n, 1, b.shape(0).size(), -2),
             per_axis(b, n, 4, b.shape(3).size(), -1), 6, 7, rank, -1);
  return std::move(b.nodes);
}

// Inputs: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B (int32, scale x_scale * w_scale).
std::vector<ir::Node> qlinear_conv(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const size_t rank = b.shape(0).size();
  std::vector<std::string> in = {centred(b, n, 0, 2, 1), centred(b, n, 3, 5, 0)};
  if (n.has_input(8)) in.push_back(to_float(b, n.inputs[8]));
  const std::string acc = b.op("Conv", in, conv_attrs(n));
  requantise(b, n, acc, per_axis(b, n, 1, rank, 1), per_axis(b, n, 4, rank, 1), 6, 7, rank, 1);
  return std::move(b.nodes);
}

// x * 2^y or x / 2^y (x unsigned: the division floors), wrapped at x's width.
std::vector<ir::Node> bit_shift(ir::Graph& g, const ir::Node& n, std::set<std::string>& t) {
  Builder b(g, n, t);
  const std::string direction = n.attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    b.fail("direction '" + direction + "' (LEFT or RIGHT)");
  const DType type = b.graph().tensor(n.inputs[0]).dtype;
  const std::string power = b.op("Pow", {int_scalar(b, type, 2), n.inputs[1]});
  if (direction == "RIGHT") {
    b.op("Div", {n.inputs[0], power}, {}, n.outputs[0]);
  } else {
    wrap(b, b.op("Mul", {n.inputs[0], power}), type, file_dtype(n, 0, 0), n.outputs[0]);
  }
  return std::move(b.nodes);
}

}  // namespace

std::optional<std::vector<ir::Node>> rewrite_integer_max_pool(ir::Graph& g, const ir::Node& n,
                                                              std::set<std::string>& taken) {
  if (n.op_type != "MaxPool" || n.inputs.empty() || !g.has_tensor(n.inputs[0]) ||
      g.tensor(n.inputs[0]).dtype != DType::kI32)
    return std::nullopt;
  // ONNX's integer MaxPool is int8 or uint8 (opset 12): exact in float32.
  Builder b(g, n, taken);
  ir::Node pool = n;
  pool.inputs[0] = to_float(b, n.inputs[0]);
  pool.outputs[0] = b.fresh("pooled");
  b.nodes.push_back(pool);
  b.op("Cast", {pool.outputs[0]}, {{"to", Attribute(int64_t{onnx::TensorProto::INT32})}},
       n.outputs[0]);
  return std::move(b.nodes);
}

std::optional<std::vector<ir::Node>> rewrite_narrow_dtype_attr(ir::Graph& g, const ir::Node& n,
                                                               std::set<std::string>& taken) {
  for (const char* key : {"to", "dtype", "output_datatype"}) {
    if (!n.has_attr(key) || ir::attr_type(n.attrs.at(key)) != ir::AttrType::kInt) continue;
    const int32_t narrow = static_cast<int32_t>(n.attr_int(key, 0));
    if (!narrow_int_bytes(narrow)) continue;
    const DType wide = imported_dtype(narrow);
    ir::Node widened = n;
    widened.attrs[key] = Attribute(
        int64_t{wide == DType::kI32 ? onnx::TensorProto::INT32 : onnx::TensorProto::INT64});
    if (n.op_type != "Cast") return std::vector<ir::Node>{widened};
    Builder b(g, n, taken);
    widened.outputs = {b.fresh("wide")};
    b.nodes.push_back(widened);
    wrap(b, widened.outputs[0], wide, narrow, n.outputs[0]);
    return std::move(b.nodes);
  }
  return std::nullopt;
}

const std::map<std::string, Expansion>& narrow_int_expansions() {
  static const std::map<std::string, Expansion> ops = {
      {"QuantizeLinear", {"Div, Round, Add, Max, Min, Cast (saturating)", quantize_linear}},
      {"DequantizeLinear", {"Cast, Sub, Mul", dequantize_linear}},
      {"DynamicQuantizeLinear",
       {"ReduceMin, ReduceMax, Div, Round, Max, Min, Cast", dynamic_quantize_linear}},
      {"MatMulInteger", {"Cast, Sub, MatMul (float32, exact below 2^24), Cast", matmul_integer}},
      {"ConvInteger", {"Cast, Sub, Conv (float32, exact below 2^24), Cast", conv_integer}},
      {"QLinearMatMul", {"Sub, MatMul, Mul, Round, Add, Max, Min, Cast", qlinear_matmul}},
      {"QLinearConv", {"Sub, Conv, Mul, Round, Add, Max, Min, Cast", qlinear_conv}},
      {"BitShift", {"Pow, Mul or Div, Mod (wrap at the width)", bit_shift}},
  };
  return ops;
}

}  // namespace pipetrain::importer::detail
