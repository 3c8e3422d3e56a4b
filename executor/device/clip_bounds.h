// Clip's bounds from inputs 1/2 (host copies), else the opset < 11
// attributes, else the dtype's extremes: one reading for the CPU and device
// kernels.
#pragma once

#include <limits>
#include <type_traits>

#include "executor/device/elementwise_math.h"
#include "executor/kernel_context.h"

namespace pipetrain::exec::device {

template <typename T>
ClipFn<T> clip_bounds(const KernelContext& h) {
  auto bound = [&](size_t i, const char* attr, T dflt) -> T {
    if (h.has_in(i)) return h.in(i).data<T>()[0];
    if (h.n().has_attr(attr)) {
      const float v = h.n().attr_float(attr, 0.0f);
      if constexpr (std::is_floating_point_v<T>)
        return v;
      else
        return float_to_int<T>(v);
    }
    return dflt;
  };
  constexpr bool kFloatT = std::is_floating_point_v<T>;
  return {bound(1, "min",
                kFloatT ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest()),
          bound(2, "max",
                kFloatT ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max())};
}

}  // namespace pipetrain::exec::device
