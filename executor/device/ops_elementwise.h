// Shared implementations of the elementwise ops, activations, their
// gradients, Where, Cast and Dropout: host code reads attributes and builds
// the indexing, then `ex.for_each(n, functor)` runs one functor call per
// output element (a loop on the host, a kernel on a GPU). The per-element
// math is elementwise_math.h, the same the CPU kernels call.
#pragma once

#include <cmath>
#include <cstring>
#include <limits>

#include "executor/device/clip_bounds.h"
#include "executor/device/device_op.h"
#include "executor/device/dropout_rule.h"
#include "executor/device/elementwise_math.h"
#include "executor/device/strided_index.h"

namespace pipetrain::exec::device {

// --- per-element functors --------------------------------------------------

template <typename T, typename E, typename R, typename Op>
struct Binary {
  const T* a;
  const E* b;
  R* y;
  StridedIndex<2> idx;
  Op op;
  PIPETRAIN_HD void operator()(int64_t i) const {
    y[i] = op(a[idx.offset(i, 0)], b[idx.offset(i, 1)]);
  }
};

template <typename T, typename R, typename Fn>
struct Unary {
  const T* x;
  R* y;
  Fn fn;
  PIPETRAIN_HD void operator()(int64_t i) const { y[i] = fn(x[i]); }
};

template <typename T, typename U, typename Fn>
struct GradMap {
  const float* dy;
  const U* t;
  float* dx;
  Fn fn;
  PIPETRAIN_HD void operator()(int64_t i) const { dx[i] = fn(dy[i], t[i]); }
};

/// Broadcast copy: y[i] = x[offset(i)].
template <typename W>
struct BroadcastCopy {
  const W* x;
  W* y;
  StridedIndex<1> idx;
  PIPETRAIN_HD void operator()(int64_t i) const { y[i] = x[idx.offset(i, 0)]; }
};

template <typename W>
struct Select {
  const uint8_t* c;
  const W* a;
  const W* b;
  W* y;
  StridedIndex<3> idx;
  PIPETRAIN_HD void operator()(int64_t i) const {
    y[i] = c[idx.offset(i, 0)] ? a[idx.offset(i, 1)] : b[idx.offset(i, 2)];
  }
};

/// out[i] = v.
struct Fill {
  float* out;
  float v;
  PIPETRAIN_HD void operator()(int64_t i) const { out[i] = v; }
};

/// Dropout by the shared counter-based rule (dropout_rule.h).
struct DropoutMask {
  const float* x;
  float* y;
  uint8_t* mask;  // may be null
  DropoutRule rule;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const bool keep = rule.keeps(i);
    y[i] = select_f32(keep, x[i] * rule.scale, 0.0f);
    if (mask) mask[i] = keep;
  }
};

/// Cast between f32, i64, i32 and bool: floats to integers truncate
/// (saturating), integers narrow by wrapping, anything non-zero is true.
template <typename S, typename D>
struct CastMap {
  const S* x;
  D* y;
  PIPETRAIN_HD void operator()(int64_t i) const {
    const S v = x[i];
    if constexpr (std::is_same_v<D, uint8_t>) {
      y[i] = static_cast<uint8_t>(v != 0);
    } else if constexpr (std::is_same_v<D, float>) {
      y[i] = static_cast<float>(std::is_same_v<S, uint8_t> ? (v != 0) : v);
    } else if constexpr (std::is_floating_point_v<S>) {
      y[i] = float_to_int<D>(v);
    } else {
      y[i] = static_cast<D>(std::is_same_v<S, uint8_t> ? static_cast<int64_t>(v != 0)
                                                       : static_cast<int64_t>(v));
    }
  }
};

// --- dtype dispatch (host) ---------------------------------------------------

/// Functors defined on booleans (stored as uint8_t); the others are
/// instantiated for f32, i64 and i32 only.
template <typename Op>
inline constexpr bool kTakesBool = false;
template <>
inline constexpr bool kTakesBool<EqualOp> = true;
template <>
inline constexpr bool kTakesBool<NotFn> = true;
template <>
inline constexpr bool kTakesBool<AndOp> = true;
template <>
inline constexpr bool kTakesBool<OrOp> = true;
template <>
inline constexpr bool kTakesBool<XorOp> = true;

/// Calls f(T{}) for the storage type of t among f32, i64, i32 and bool.
template <typename F>
void with_storage(ir::DType t, F&& f) {
  switch (t) {
    case ir::DType::kF32: f(float{}); break;
    case ir::DType::kI64: f(int64_t{}); break;
    case ir::DType::kI32: f(int32_t{}); break;
    case ir::DType::kBool: f(uint8_t{}); break;
    default: throw UnsupportedOp(std::string("dtype ") + ir::dtype_name(t) + " on the device");
  }
}

/// Calls f(W{}) for an unsigned word of the dtype's size (data movement).
template <typename F>
void with_word(ir::DType t, F&& f) {
  switch (ir::dtype_size(t)) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: throw UnsupportedOp(std::string("dtype ") + ir::dtype_name(t) + " on the device");
  }
}

// --- ops ---------------------------------------------------------------------

/// Y = op(A, B) with numpy broadcasting; the result type is op's.
template <typename Op, typename Exec>
void binary_op_with(Exec& ex, DeviceOpArgs& a, Op op) {
  const DeviceTensor &x = a.in[0], &w = a.in[1], &y = a.out[0];
  const auto idx = broadcast_index<2>(y.shape, {&x.shape, &w.shape});
  with_storage(x.dtype, [&](auto tag) {
    using T = std::decay_t<decltype(tag)>;
    if constexpr (!std::is_same_v<T, uint8_t> || kTakesBool<Op>) {
      using R = decltype(op(T{}, T{}));
      ex.for_each(y.numel(), Binary<T, T, R, Op>{x.data<T>(), w.data<T>(), y.data<R>(), idx, op});
    }
  });
}
template <typename Op, typename Exec>
void binary_op(Exec& ex, DeviceOpArgs& a) {
  binary_op_with(ex, a, Op{});
}

/// y[i] /= d (Mean's division by the input count).
struct DivideBy {
  float* y;
  float d;
  PIPETRAIN_HD void operator()(int64_t i) const { y[i] = y[i] / d; }
};

/// Max/Min over 1..N inputs: Y = broadcast(X0), then Y = op(Y, Xi) in input order.
template <typename Op, typename Exec>
void variadic_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor& y = a.out[0];
  with_storage(y.dtype, [&](auto tag) {
    using T = std::decay_t<decltype(tag)>;
    if constexpr (!std::is_same_v<T, uint8_t>) {
      ex.for_each(y.numel(), BroadcastCopy<T>{a.in[0].data<T>(), y.data<T>(),
                                              broadcast_index<1>(y.shape, {&a.in[0].shape})});
      for (size_t i = 1; i < a.in.size(); ++i)
        ex.for_each(y.numel(), Binary<T, T, T, Op>{
                                   y.data<T>(), a.in[i].data<T>(), y.data<T>(),
                                   broadcast_index<2>(y.shape, {&y.shape, &a.in[i].shape}), Op{}});
    }
  });
}

/// Mean of 1..N float inputs: their sum in input order, divided by N.
template <typename Exec>
void mean_op(Exec& ex, DeviceOpArgs& a) {
  variadic_op<AddOp>(ex, a);
  ex.for_each(a.out[0].numel(), DivideBy{a.out[0].data<float>(), static_cast<float>(a.in.size())});
}

template <typename Exec>
void pow_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &e = a.in[1], &y = a.out[0];
  const auto idx = broadcast_index<2>(y.shape, {&x.shape, &e.shape});
  with_storage(x.dtype, [&](auto xtag) {
    using T = std::decay_t<decltype(xtag)>;
    with_storage(e.dtype, [&](auto etag) {
      using E = std::decay_t<decltype(etag)>;
      if constexpr (!std::is_same_v<T, uint8_t> && !std::is_same_v<E, uint8_t>)
        ex.for_each(y.numel(),
                    Binary<T, E, T, PowOp>{x.data<T>(), e.data<E>(), y.data<T>(), idx, PowOp{}});
    });
  });
}

/// y[i] = fn(x[i]) for the dtypes fn takes (float-only functors see f32 only).
template <typename Fn, typename Exec>
void unary_op(Exec& ex, DeviceOpArgs& a, Fn fn = {}) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  with_storage(x.dtype, [&](auto tag) {
    using T = std::decay_t<decltype(tag)>;
    if constexpr (std::is_invocable_v<Fn, T> && (!std::is_same_v<T, uint8_t> || kTakesBool<Fn>)) {
      using R = decltype(fn(T{}));
      ex.for_each(x.numel(), Unary<T, R, Fn>{x.data<T>(), y.data<R>(), fn});
    }
  });
}

/// dx[i] = fn(dy[i], t[i]), t = input 1.
template <typename Fn, typename Exec>
void grad_op(Exec& ex, DeviceOpArgs& a, Fn fn = {}) {
  ex.for_each(a.in[0].numel(),
              GradMap<float, float, Fn>{a.in[0].data<float>(), a.in[1].data<float>(),
                                        a.out[0].data<float>(), fn});
}

template <typename Exec>
void leaky_relu_op(Exec& ex, DeviceOpArgs& a) {
  unary_op(ex, a, LeakyReluFn{a.n().attr_float("alpha", 0.01f)});
}

template <typename Exec>
void hard_sigmoid_op(Exec& ex, DeviceOpArgs& a) {
  unary_op(ex, a, HardSigmoidFn{a.n().attr_float("alpha", 0.2f), a.n().attr_float("beta", 0.5f)});
}

template <typename Exec>
void gelu_op(Exec& ex, DeviceOpArgs& a) {
  if (a.n().attr_string("approximate", "none") == "tanh")
    unary_op(ex, a, GeluTanhFn{});
  else
    unary_op(ex, a, GeluFn{});
}

template <typename Exec>
void clip_op(Exec& ex, DeviceOpArgs& a) {
  const KernelContext& h = *a.host;
  with_storage(a.in[0].dtype, [&](auto tag) {
    using T = std::decay_t<decltype(tag)>;
    if constexpr (!std::is_same_v<T, uint8_t>) {
      ex.for_each(a.in[0].numel(),
                  Unary<T, T, ClipFn<T>>{a.in[0].data<T>(), a.out[0].data<T>(), clip_bounds<T>(h)});
    }
  });
}
template <typename Exec>
void leaky_relu_grad_op(Exec& ex, DeviceOpArgs& a) {
  grad_op(ex, a, LeakyReluGradFn{a.n().attr_float("alpha", 0.01f)});
}

template <typename Exec>
void hard_sigmoid_grad_op(Exec& ex, DeviceOpArgs& a) {
  grad_op(ex, a,
          HardSigmoidGradFn{a.n().attr_float("alpha", 0.2f), a.n().attr_float("beta", 0.5f)});
}

template <typename Exec>
void gelu_grad_op(Exec& ex, DeviceOpArgs& a) {
  if (a.n().attr_string("approximate", "none") == "tanh")
    grad_op(ex, a, GeluTanhGradFn{});
  else
    grad_op(ex, a, GeluGradFn{});
}

/// (dY, X, min?, max?): an absent bound is -inf / +inf.
template <typename Exec>
void clip_grad_op(Exec& ex, DeviceOpArgs& a) {
  const KernelContext& h = *a.host;
  const float lo =
      h.has_in(2) ? static_cast<float>(h.in(2).at(0)) : -std::numeric_limits<float>::infinity();
  const float hi =
      h.has_in(3) ? static_cast<float>(h.in(3).at(0)) : std::numeric_limits<float>::infinity();
  grad_op(ex, a, ClipGradFn{lo, hi});
}

/// (dY, mask, ratio?): dX = dY * mask / (1 - ratio), ratio 0.5 when absent.
template <typename Exec>
void dropout_grad_op(Exec& ex, DeviceOpArgs& a) {
  const KernelContext& h = *a.host;
  const float ratio = h.has_in(2) ? static_cast<float>(h.in(2).at(0)) : 0.5f;
  const float scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
  ex.for_each(a.in[0].numel(),
              GradMap<float, uint8_t, DropoutGradFn>{a.in[0].data<float>(), a.in[1].data<uint8_t>(),
                                                     a.out[0].data<float>(), DropoutGradFn{scale}});
}

/// Training keeps element i when hash(seed, i) clears the ratio (the CPU
/// kernel's counter-based mask, so both give the same mask); inference copies.
template <typename Exec>
void dropout_op(Exec& ex, DeviceOpArgs& a) {
  const KernelContext& h = *a.host;
  const int64_t n = a.in[0].numel();
  uint8_t* mask = a.has_out(1) ? a.out[1].data<uint8_t>() : nullptr;
  const bool training = h.has_in(2) ? h.in(2).at(0) != 0.0 : h.training;
  float ratio = h.n().attr_float("ratio", 0.5f);
  if (h.has_in(1)) ratio = static_cast<float>(h.in(1).at(0));
  const uint64_t seed =
      h.n().has_attr("seed") ? static_cast<uint64_t>(h.n().attr_int("seed", 0)) : h.seed;
  const DropoutRule rule = training ? dropout_rule(seed, ratio) : DropoutRule{};
  ex.for_each(n, DropoutMask{a.in[0].data<float>(), a.out[0].data<float>(), mask, rule});
}

/// Y = C ? X : Y, moved as words of the element size (every dtype).
template <typename Exec>
void where_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &c = a.in[0], &x = a.in[1], &w = a.in[2], &y = a.out[0];
  const auto idx = broadcast_index<3>(y.shape, {&c.shape, &x.shape, &w.shape});
  with_word(x.dtype, [&](auto tag) {
    using W = std::decay_t<decltype(tag)>;
    ex.for_each(y.numel(),
                Select<W>{c.data<uint8_t>(), x.data<W>(), w.data<W>(), y.data<W>(), idx});
  });
}

template <typename Exec>
void cast_op(Exec& ex, DeviceOpArgs& a) {
  const DeviceTensor &x = a.in[0], &y = a.out[0];
  with_storage(x.dtype, [&](auto stag) {
    using S = std::decay_t<decltype(stag)>;
    with_storage(y.dtype, [&](auto dtag) {
      using D = std::decay_t<decltype(dtag)>;
      ex.for_each(x.numel(), CastMap<S, D>{x.data<S>(), y.data<D>()});
    });
  });
}

}  // namespace pipetrain::exec::device
