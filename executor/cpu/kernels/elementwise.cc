// CPU kernels of the elementwise ops: broadcast binaries, comparisons,
// variadic Max/Min, unaries, Where and Cast. f16/bf16 math runs through f32
// (with_f32); integer arithmetic wraps instead of overflowing.
#include <cmath>
#include <cstring>

#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/broadcast.h"
#include "executor/cpu/kernels/ew_common.h"
#include "executor/cpu/kernels/vec_math.h"

namespace pipetrain::exec::cpu {

namespace {

using ir::DType;
using ir::Tensor;

const std::vector<DType> kNumeric = {DType::kF32, DType::kF16, DType::kBF16, DType::kI64,
                                     DType::kI32};
const std::vector<DType> kFloat = {DType::kF32, DType::kF16, DType::kBF16};

// --- binary --------------------------------------------------------------

using device::AddOp;
using device::AndOp;
using device::DivOp;
using device::EqualOp;
using device::GreaterOp;
using device::GreaterOrEqualOp;
using device::LessOp;
using device::LessOrEqualOp;
using device::MaxOp;
using device::MinOp;
using device::ModOp;
using device::MulOp;
using device::OrOp;
using device::PReluOp;
using device::SubOp;
using device::XorOp;

/// Y = op(A, B) for the same-dtype binaries; the output element type is op's.
template <typename Op, typename... Ts>
void binary_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  Tensor& y = ctx.out(0);
  dispatch<Ts...>(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using R = decltype(Op{}(T{}, T{}));
    binary_broadcast(a.data<T>(), a.shape(), b.data<T>(), b.shape(), y.data<R>(), y.shape(),
                     [](T p, T q) { return Op{}(p, q); });
  });
}

/// Mod: binary_kernel with the node's fmod attribute.
void mod_kernel(KernelContext& ctx) {
  const ModOp op{ctx.n().attr_int("fmod", 0) != 0};
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  Tensor& y = ctx.out(0);
  dispatch<float, int64_t, int32_t>(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    binary_broadcast(a.data<T>(), a.shape(), b.data<T>(), b.shape(), y.data<T>(), y.shape(),
                     [op](T p, T q) { return op(p, q); });
  });
}

template <typename Op>
CpuKernel arith_kernel() {
  return {with_f32<binary_kernel<Op, float, int64_t, int32_t>>, kNumeric, 0};
}

/// Max/Min over 1..N inputs: Y = broadcast(X0), then Y = op(Y, Xi) in input order.
template <typename Op>
void variadic_kernel(KernelContext& ctx) {
  Tensor& y = ctx.out(0);
  dispatch<float, int64_t, int32_t>(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* py = y.data<T>();  // (broadcast of all input shapes)
    broadcast_copy(ctx.in(0).data<T>(), ctx.in(0).shape(), py, y.shape());
    for (size_t i = 1; i < ctx.inputs.size(); ++i)
      binary_broadcast(py, y.shape(), ctx.in(i).data<T>(), ctx.in(i).shape(), py, y.shape(),
                       [](T p, T q) { return Op{}(p, q); });
  });
}

/// Mean: the inputs' sum in input order, divided by their count.
void mean_kernel(KernelContext& ctx) {
  variadic_kernel<AddOp>(ctx);
  Tensor& y = ctx.out(0);
  float* py = y.data<float>();
  const float n = static_cast<float>(ctx.inputs.size());
  for (int64_t i = 0; i < y.numel(); ++i) py[i] = py[i] / n;
}

// --- Pow -----------------------------------------------------------------

/// Y = X ^ E with X and E each in {f32, i64, i32}.
void pow_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& e = ctx.in(1);
  Tensor& y = ctx.out(0);
  dispatch<float, int64_t, int32_t>(x.dtype(), [&](auto xtag) {
    using T = decltype(xtag);
    dispatch<float, int64_t, int32_t>(e.dtype(), [&](auto etag) {
      using E = decltype(etag);
      binary_broadcast(x.data<T>(), x.shape(), e.data<E>(), e.shape(), y.data<T>(), y.shape(),
                       [](T a, E b) { return device::pow_value(a, b); });
    });
  });
}

// --- unary ---------------------------------------------------------------

template <typename Fn, typename... Ts>
void unary_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  dispatch<Ts...>(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for_each_index(x.numel(), kMathCost, [&](int64_t i) { py[i] = Fn{}(px[i]); });
  });
}

using device::AbsFn;
using device::AcosFn;
using device::AcoshFn;
using device::AsinFn;
using device::AsinhFn;
using device::AtanFn;
using device::AtanhFn;
using device::CeilFn;
using device::CosFn;
using device::CoshFn;
using device::ErfFn;
using device::ExpFn;
using device::FloorFn;
using device::LogFn;
using device::NegFn;
using device::ReciprocalFn;
using device::RoundFn;
using device::SignFn;
using device::SinFn;
using device::SinhFn;
using device::SqrtFn;
using device::TanFn;

template <typename Fn>
CpuKernel float_unary() {
  return {with_f32<unary_kernel<Fn, float>>, kFloat, 0};
}

/// A float test giving bool: IsNaN, IsInf.
template <typename Fn>
void float_test_kernel(KernelContext& ctx, Fn fn) {
  const float* px = ctx.in(0).data<float>();
  uint8_t* py = ctx.out(0).data<uint8_t>();
  const int64_t n = ctx.in(0).numel();
  for (int64_t i = 0; i < n; ++i) py[i] = fn(px[i]);
}

void shrink_kernel(KernelContext& ctx) {
  const device::ShrinkFn fn{ctx.n().attr_float("lambd", 0.5f), ctx.n().attr_float("bias", 0.0f)};
  const float* px = ctx.in(0).data<float>();
  float* py = ctx.out(0).data<float>();
  for (int64_t i = 0; i < ctx.in(0).numel(); ++i) py[i] = fn(px[i]);
}

void is_nan_kernel(KernelContext& ctx) {
  float_test_kernel(ctx, device::IsNaNFn{});
}
void is_inf_kernel(KernelContext& ctx) {
  float_test_kernel(ctx, device::IsInfFn{ctx.n().attr_int("detect_negative", 1) != 0,
                                         ctx.n().attr_int("detect_positive", 1) != 0});
}

// --- Where ---------------------------------------------------------------

/// Y = C ? X : Y; moves elements by size, so every dtype works.
void where_kernel(KernelContext& ctx) {
  const Tensor& c = ctx.in(0);
  const Tensor& x = ctx.in(1);
  const Tensor& yv = ctx.in(2);
  Tensor& out = ctx.out(0);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    ternary_broadcast(c.data<uint8_t>(), c.shape(), x.data<T>(), x.shape(), yv.data<T>(),
                      yv.shape(), out.data<T>(), out.shape(),
                      [](uint8_t k, T p, T q) { return k ? p : q; });
  };
  switch (ir::dtype_size(x.dtype())) {
    case 1: run(uint8_t{}); break;
    case 2: run(uint16_t{}); break;
    case 4: run(uint32_t{}); break;
    case 8: run(uint64_t{}); break;
    default: assert(false);
  }
}

// --- Cast ----------------------------------------------------------------

/// Element i of a tensor of dtype S: float for float dtypes, int64 otherwise.
template <DType S>
auto load_value(const Tensor& t, int64_t i) {
  if constexpr (S == DType::kF32) return t.data<float>()[i];
  if constexpr (S == DType::kF16) return ir::f16_to_f32(t.data<uint16_t>()[i]);
  if constexpr (S == DType::kBF16) return ir::bf16_to_f32(t.data<uint16_t>()[i]);
  if constexpr (S == DType::kI64) return t.data<int64_t>()[i];
  if constexpr (S == DType::kI32) return static_cast<int64_t>(t.data<int32_t>()[i]);
  if constexpr (S == DType::kBool) return static_cast<int64_t>(t.data<uint8_t>()[i] != 0);
}

/// v converted to dtype D's storage: floats round to nearest even, floats to
/// integers truncate (saturating), integers narrow by wrapping like numpy,
/// anything non-zero (NaN included) is true.
template <DType D, typename V>
auto store_value(V v) {
  constexpr bool kFromFloat = std::is_floating_point_v<V>;
  if constexpr (D == DType::kF32) return static_cast<float>(v);
  if constexpr (D == DType::kF16) return ir::f32_to_f16(static_cast<float>(v));
  if constexpr (D == DType::kBF16) return ir::f32_to_bf16(static_cast<float>(v));
  if constexpr (D == DType::kBool) return static_cast<uint8_t>(v != 0);
  if constexpr (D == DType::kI64) {
    if constexpr (kFromFloat)
      return float_to_int<int64_t>(v);
    else
      return static_cast<int64_t>(v);
  }
  if constexpr (D == DType::kI32) {
    if constexpr (kFromFloat)
      return float_to_int<int32_t>(v);
    else
      return static_cast<int32_t>(v);
  }
}

/// Calls f.template operator()<t>() for a runtime dtype t.
template <typename F>
void with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kF32: f.template operator()<DType::kF32>(); break;
    case DType::kF16: f.template operator()<DType::kF16>(); break;
    case DType::kBF16: f.template operator()<DType::kBF16>(); break;
    case DType::kI64: f.template operator()<DType::kI64>(); break;
    case DType::kI32: f.template operator()<DType::kI32>(); break;
    case DType::kBool: f.template operator()<DType::kBool>(); break;
    case DType::kUndefined: assert(false); break;
  }
}

void cast_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  if (x.dtype() == y.dtype()) {
    if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
    return;
  }
  with_dtype(x.dtype(), [&]<DType S>() {
    with_dtype(y.dtype(), [&]<DType D>() {
      using Out = decltype(store_value<D>(load_value<S>(x, 0)));
      Out* py = y.data<Out>();
      for_each_index(x.numel(), 1, [&](int64_t i) { py[i] = store_value<D>(load_value<S>(x, i)); });
    });
  });
}

}  // namespace

CpuKernel kernel_Add() {
  return arith_kernel<AddOp>();
}
CpuKernel kernel_Sub() {
  return arith_kernel<SubOp>();
}
CpuKernel kernel_Mul() {
  return arith_kernel<MulOp>();
}
CpuKernel kernel_Div() {
  return arith_kernel<DivOp>();
}
CpuKernel kernel_Pow() {
  return {with_f32<pow_kernel>, kNumeric, 0};
}
CpuKernel kernel_Equal() {
  return {with_f32<binary_kernel<EqualOp, float, int64_t, int32_t, uint8_t>>,
          {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kBool},
          0};
}
CpuKernel kernel_Less() {
  return {with_f32<binary_kernel<LessOp, float, int64_t, int32_t>>, kNumeric, 0};
}
CpuKernel kernel_Greater() {
  return {with_f32<binary_kernel<GreaterOp, float, int64_t, int32_t>>, kNumeric, 0};
}
CpuKernel kernel_Mod() {
  return {with_f32<mod_kernel>, kNumeric, 0};
}
CpuKernel kernel_PRelu() {
  return arith_kernel<PReluOp>();
}
CpuKernel kernel_Shrink() {
  return {with_f32<shrink_kernel>, kFloat, 0};
}
CpuKernel kernel_And() {
  return {binary_kernel<AndOp, uint8_t>, {DType::kBool}, 0};
}
CpuKernel kernel_Or() {
  return {binary_kernel<OrOp, uint8_t>, {DType::kBool}, 0};
}
CpuKernel kernel_Xor() {
  return {binary_kernel<XorOp, uint8_t>, {DType::kBool}, 0};
}
CpuKernel kernel_Sum() {
  return {with_f32<variadic_kernel<AddOp>>, kNumeric, 0};
}
CpuKernel kernel_Mean() {
  return {with_f32<mean_kernel>, kFloat, 0};
}
CpuKernel kernel_GreaterOrEqual() {
  return {with_f32<binary_kernel<GreaterOrEqualOp, float, int64_t, int32_t>>, kNumeric, 0};
}
CpuKernel kernel_LessOrEqual() {
  return {with_f32<binary_kernel<LessOrEqualOp, float, int64_t, int32_t>>, kNumeric, 0};
}
CpuKernel kernel_Max() {
  return {with_f32<variadic_kernel<MaxOp>>, kNumeric, 0};
}
CpuKernel kernel_Min() {
  return {with_f32<variadic_kernel<MinOp>>, kNumeric, 0};
}

CpuKernel kernel_Sqrt() {
  return float_unary<SqrtFn>();
}
CpuKernel kernel_Exp() {
  return float_unary<ExpFn>();
}
CpuKernel kernel_Log() {
  return float_unary<LogFn>();
}
CpuKernel kernel_Reciprocal() {
  return float_unary<ReciprocalFn>();
}
CpuKernel kernel_Erf() {
  return float_unary<ErfFn>();
}
CpuKernel kernel_Sin() {
  return float_unary<SinFn>();
}
CpuKernel kernel_Cos() {
  return float_unary<CosFn>();
}
CpuKernel kernel_Tan() {
  return float_unary<TanFn>();
}
CpuKernel kernel_Asin() {
  return float_unary<AsinFn>();
}
CpuKernel kernel_Acos() {
  return float_unary<AcosFn>();
}
CpuKernel kernel_Atan() {
  return float_unary<AtanFn>();
}
CpuKernel kernel_Sinh() {
  return float_unary<SinhFn>();
}
CpuKernel kernel_Cosh() {
  return float_unary<CoshFn>();
}
CpuKernel kernel_Asinh() {
  return float_unary<AsinhFn>();
}
CpuKernel kernel_Acosh() {
  return float_unary<AcoshFn>();
}
CpuKernel kernel_Atanh() {
  return float_unary<AtanhFn>();
}
CpuKernel kernel_IsNaN() {
  return {with_f32<is_nan_kernel>, kFloat, 0};
}
CpuKernel kernel_IsInf() {
  return {with_f32<is_inf_kernel>, kFloat, 0};
}
CpuKernel kernel_Floor() {
  return float_unary<FloorFn>();
}
CpuKernel kernel_Ceil() {
  return float_unary<CeilFn>();
}
CpuKernel kernel_Round() {
  return float_unary<RoundFn>();
}
CpuKernel kernel_Sign() {
  return float_unary<SignFn>();
}
CpuKernel kernel_Neg() {
  return {with_f32<unary_kernel<NegFn, float, int64_t, int32_t>>, kNumeric, 0};
}
CpuKernel kernel_Abs() {
  return {with_f32<unary_kernel<AbsFn, float, int64_t, int32_t>>, kNumeric, 0};
}
CpuKernel kernel_Not() {
  return {[](KernelContext& ctx) {
            const uint8_t* px = ctx.in(0).data<uint8_t>();
            uint8_t* py = ctx.out(0).data<uint8_t>();
            const int64_t n = ctx.in(0).numel();
            for (int64_t i = 0; i < n; ++i) py[i] = device::NotFn{}(px[i]);
          },
          {DType::kBool},
          0};
}

CpuKernel kernel_Where() {
  return {where_kernel,
          {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kBool},
          1};
}

CpuKernel kernel_Cast() {
  return {cast_kernel,
          {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kBool},
          0};
}
// The output tensor carries the target dtype: Cast's kernel.
CpuKernel kernel_CastLike() {
  return kernel_Cast();
}

}  // namespace pipetrain::exec::cpu
