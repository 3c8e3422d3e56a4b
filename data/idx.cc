#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ir/error.h"

namespace pipetrain::data {

namespace {

bool valid_type(uint8_t t) {
  return t == 0x08 || t == 0x09 || t == 0x0B || t == 0x0C || t == 0x0D || t == 0x0E;
}

// Swaps every element of `bytes` between big-endian and host order (a no-op on big-endian hosts).
void swap_to_host(std::vector<uint8_t>& bytes, size_t elem) {
  if constexpr (std::endian::native == std::endian::big) return;
  if (elem == 1) return;
  for (size_t i = 0; i + elem <= bytes.size(); i += elem)
    std::reverse(bytes.begin() + static_cast<std::ptrdiff_t>(i),
                 bytes.begin() + static_cast<std::ptrdiff_t>(i + elem));
}

// Closes a gzFile on every path out.
struct GzFile {
  gzFile f = nullptr;
  ~GzFile() {
    if (f) gzclose(f);
  }
};

// Reads exactly n bytes; returns how many were read. Throws on a zlib (corrupt stream) error.
size_t gz_read(gzFile f, void* dst, size_t n, const std::string& path) {
  size_t done = 0;
  auto* out = static_cast<uint8_t*>(dst);
  while (done < n) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    int got = gzread(f, out + done, chunk);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      throw ModelError(path + ": corrupt gzip data (" + (msg ? msg : "zlib error") + ")");
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

}  // namespace

size_t idx_type_size(IdxType t) {
  switch (t) {
    case IdxType::kU8:
    case IdxType::kI8: return 1;
    case IdxType::kI16: return 2;
    case IdxType::kI32:
    case IdxType::kF32: return 4;
    case IdxType::kF64: return 8;
  }
  return 0;
}

int64_t IdxArray::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

double IdxArray::at(int64_t i) const {
  const uint8_t* p = bytes.data() + static_cast<size_t>(i) * idx_type_size(type);
  switch (type) {
    case IdxType::kU8: return *p;
    case IdxType::kI8: return static_cast<int8_t>(*p);
    case IdxType::kI16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case IdxType::kI32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case IdxType::kF32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case IdxType::kF64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
  return 0;
}

IdxArray read_idx(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw ModelError(path + ": no such file");
  GzFile gz;
  gz.f = gzopen(path.c_str(), "rb");
  if (!gz.f) throw ModelError(path + ": cannot open");
  uint8_t magic[4];
  if (gz_read(gz.f, magic, 4, path) != 4) throw ModelError(path + ": truncated IDX header");
  if (magic[0] != 0 || magic[1] != 0 || !valid_type(magic[2]) || magic[3] == 0 || magic[3] > 8) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%02X%02X%02X%02X", magic[0], magic[1], magic[2], magic[3]);
    throw ModelError(path + ": bad IDX magic number " + hex +
                     " (expected 0x0000TTRR: type 08/09/0B/0C/0D/0E, rank 1 to 8)");
  }
  IdxArray a;
  a.type = static_cast<IdxType>(magic[2]);
  std::vector<uint8_t> dims(4u * magic[3]);
  if (gz_read(gz.f, dims.data(), dims.size(), path) != dims.size())
    throw ModelError(path + ": truncated IDX header");
  const size_t elem = idx_type_size(a.type);
  uint64_t total = elem;
  for (size_t i = 0; i < magic[3]; ++i) {
    uint32_t d = (uint32_t{dims[4 * i]} << 24) | (uint32_t{dims[4 * i + 1]} << 16) |
                 (uint32_t{dims[4 * i + 2]} << 8) | uint32_t{dims[4 * i + 3]};
    a.dims.push_back(d);
    total *= d;
    if (total > (uint64_t{1} << 36))
      throw ModelError(path + ": IDX dimensions are implausibly large");
  }
  // In chunks, so that memory follows the data actually there: a damaged
  // header can claim gigabytes that a short file does not hold.
  constexpr size_t kChunk = size_t{1} << 24;
  while (a.bytes.size() < total) {
    const size_t have = a.bytes.size();
    const size_t want = std::min<size_t>(kChunk, total - have);
    a.bytes.resize(have + want);
    const size_t got = gz_read(gz.f, a.bytes.data() + have, want, path);
    if (got != want)
      throw ModelError(path + ": truncated IDX data: " + std::to_string(have + got) + " of " +
                       std::to_string(total) + " bytes");
  }
  uint8_t extra;
  if (gz_read(gz.f, &extra, 1, path) != 0)
    throw ModelError(path + ": trailing bytes after the IDX data its header describes");
  swap_to_host(a.bytes, elem);
  return a;
}

void write_idx(const std::string& path, const IdxArray& a, bool gzip) {
  assert(a.bytes.size() == static_cast<size_t>(a.numel()) * idx_type_size(a.type));
  std::vector<uint8_t> out = {0, 0, static_cast<uint8_t>(a.type),
                              static_cast<uint8_t>(a.dims.size())};
  for (int64_t d : a.dims) {
    uint32_t u = static_cast<uint32_t>(d);
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(u >> s));
  }
  std::vector<uint8_t> data = a.bytes;
  swap_to_host(data, idx_type_size(a.type));  // host to big-endian: the same swap
  out.insert(out.end(), data.begin(), data.end());
  // "T" asks zlib for a plain (transparent) write.
  gzFile f = gzopen(path.c_str(), gzip ? "wb" : "wbT");
  if (!f) throw Error(path + ": cannot write");
  int wrote = gzwrite(f, out.data(), static_cast<unsigned>(out.size()));
  int closed = gzclose(f);
  if (wrote != static_cast<int>(out.size()) || closed != Z_OK) throw Error(path + ": write failed");
}

ir::Tensor idx_to_features(const IdxArray& a) {
  // (N) -> (N, 1); (N, H, W) -> (N, 1, H, W); other ranks as stored.
  ir::Shape shape;
  for (size_t i = 0; i < a.dims.size(); ++i) {
    shape.push_back(a.dims[i]);
    if (i == 0 && (a.dims.size() == 3 || a.dims.size() == 1)) shape.push_back(1);
  }
  ir::Tensor t(ir::DType::kF32, shape);
  float* out = t.data<float>();  // (N, ...)
  const int64_t n = a.numel();
  if (a.type == IdxType::kU8) {
    // Pixels: v / 255 in float, the same as torchvision's ToTensor.
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(a.bytes[i]) / 255.0f;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(a.at(i));
  }
  return t;
}

ir::Tensor idx_to_labels(const IdxArray& a, const std::string& path) {
  if (a.dims.size() != 1)
    throw ModelError(path + ": IDX labels must have rank 1, this file has rank " +
                     std::to_string(a.dims.size()));
  if (a.type == IdxType::kF32 || a.type == IdxType::kF64)
    throw ModelError(path + ": IDX labels must be integers, this file holds floats");
  ir::Tensor t(ir::DType::kI64, {a.dims[0]});
  int64_t* out = t.data<int64_t>();  // (N)
  for (int64_t i = 0; i < a.dims[0]; ++i) out[i] = static_cast<int64_t>(a.at(i));
  return t;
}

}  // namespace pipetrain::data
