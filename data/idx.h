// IDX files (the MNIST format), gzipped or not: a big-endian header
// `0 0 <type> <rank>`, rank big-endian u32 dimensions, then big-endian data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace pipetrain::data {

/// IDX element type codes (the third magic byte).
enum class IdxType : uint8_t {
  kU8 = 0x08,
  kI8 = 0x09,
  kI16 = 0x0B,
  kI32 = 0x0C,
  kF32 = 0x0D,
  kF64 = 0x0E,
};
size_t idx_type_size(IdxType t);

/// The decoded contents: element type, dimensions and native-endian bytes.
struct IdxArray {
  IdxType type = IdxType::kU8;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // numel * idx_type_size(type), host byte order
  int64_t numel() const;
  double at(int64_t i) const;
};

/// Reads a plain or gzipped IDX file (zlib detects which). Throws ModelError naming the file on
/// a missing file, a bad magic number, an unknown type, truncated or trailing data.
IdxArray read_idx(const std::string& path);
/// Writes an IDX file, gzipped when `gzip` (tests and tools).
void write_idx(const std::string& path, const IdxArray& a, bool gzip);

/// Features: f32 of the same shape; u8 values are scaled by 1/255 into [0, 1]. A rank-3 array
/// (N, H, W) of images gains a channel dimension: (N, 1, H, W).
ir::Tensor idx_to_features(const IdxArray& a);
/// Labels: a rank-1 integer array to i64 class ids. Throws ModelError naming `path` otherwise.
ir::Tensor idx_to_labels(const IdxArray& a, const std::string& path);

}  // namespace pipetrain::data
