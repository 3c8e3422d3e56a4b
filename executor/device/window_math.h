// Window arithmetic shared by the CPU pooling kernels and the device ones.
#pragma once

#include <cstdint>

#include "executor/device/hd.h"

namespace pipetrain::exec::device {

/// Taps [lo, hi) of a window starting at `start` (k taps, dilation d) that
/// fall inside [0, size).
PIPETRAIN_HD inline void valid_taps(int64_t start, int64_t k, int64_t d, int64_t size, int64_t& lo,
                                    int64_t& hi) {
  lo = start >= 0 ? 0 : (-start + d - 1) / d;
  if (start >= size) {
    hi = lo;
    return;
  }
  hi = start + (k - 1) * d < size ? k : (size - 1 - start) / d + 1;
  hi = hi > lo ? hi : lo;
}

}  // namespace pipetrain::exec::device
