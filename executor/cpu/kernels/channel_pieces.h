// BatchNorm's per-channel loops over a (N, C, H, W) activation in either
// layout (blocked_layout.h). Blocked, a channel's elements lie B apart and
// neighbouring channels are neighbours, so the loops take pieces of up to
// kPiece channels of one block and run across them: one vector of channels
// per position. The sums keep the row-major kernels' order exactly (per
// (n, c) plane sum_row's kLanes lanes folded in its tree, planes in n order),
// so either layout gives the same bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "executor/device/row_math.h"

namespace pipetrain::exec::cpu {

/// Channels one task of the blocked loops takes at a time.
inline constexpr int64_t kPiece = 16;

/// Where element (n, c, i) of a (N, C, S) tensor lies: at plane(n, c) +
/// i * step() + the channel's offset, with block 0 meaning row-major.
struct ChannelLayout {
  int64_t channels = 0, size = 0, block = 0;
  int64_t plane(int64_t n, int64_t c) const {
    return block ? (n * channels + c / block * block) * size + c % block
                 : (n * channels + c) * size;
  }
  int64_t step() const { return block ? block : 1; }         // between positions
  int64_t channel_step() const { return block ? 1 : size; }  // between channels
};

/// Channels [c0, c0 + w) inside one block.
struct ChannelPiece {
  int64_t c0 = 0, w = 0;
};

/// The pieces covering all channels, none crossing a block (block 0: C).
inline std::vector<ChannelPiece> channel_pieces(int64_t channels, int64_t block) {
  const int64_t b = block ? block : channels;
  std::vector<ChannelPiece> out;
  for (int64_t c = 0; c < channels;) {
    const int64_t w = std::min({kPiece, b - c % b, channels - c});
    out.push_back({c, w});
    c += w;
  }
  return out;
}

/// out[k][j] += the sum over positions i in [0, size) of term k, for j < w
/// and k < K (terms(i, j, t) sets t[0..K)): lane i % kLanes accumulates in
/// i order and the lanes fold in fold_lanes' tree, which is sum_row's order
/// for each channel of the piece.
template <int K, typename Terms>
void add_plane_sums(int64_t size, int64_t w, Terms terms, double* const* out) {
  using device::kLanes;
  double acc[K][kLanes][kPiece] = {};
  for (int64_t i = 0; i < size; ++i) {
    const int64_t l = i % kLanes;
    for (int64_t j = 0; j < w; ++j) {
      double t[K];
      terms(i, j, t);
      for (int k = 0; k < K; ++k) acc[k][l][j] += t[k];
    }
  }
  for (int k = 0; k < K; ++k) {
    for (int64_t h = kLanes / 2; h > 0; h /= 2)
      for (int64_t l = 0; l < h; ++l)
        for (int64_t j = 0; j < w; ++j) acc[k][l][j] += acc[k][l + h][j];
    for (int64_t j = 0; j < w; ++j) out[k][j] += acc[k][0][j];
  }
}

}  // namespace pipetrain::exec::cpu
