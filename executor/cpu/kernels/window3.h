// A window geometry padded to 3 spatial axes (missing leading axes have size
// 1, stride 1, no padding), so 1-D, 2-D and 3-D convolution and pooling share
// one loop nest.
#pragma once

#include <cstdint>

#include "ir/ops/window.h"

namespace pipetrain::exec::cpu {

struct Window3 {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

inline Window3 to_window3(const ir::WindowGeometry& g) {
  Window3 w;
  size_t lead = 3 - g.rank();
  for (size_t i = 0; i < 3; ++i) {
    bool real = i >= lead;
    size_t j = i - lead;
    w.in[i] = real ? g.in[j] : 1;
    w.out[i] = real ? g.out[j] : 1;
    w.k[i] = real ? g.kernel[j] : 1;
    w.s[i] = real ? g.strides[j] : 1;
    w.d[i] = real ? g.dilations[j] : 1;
    w.pb[i] = real ? g.pads_begin[j] : 0;
    w.pe[i] = real ? g.pads_end[j] : 0;
  }
  return w;
}

}  // namespace pipetrain::exec::cpu
