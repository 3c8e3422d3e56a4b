#include "data/npz.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/error.h"
#include "ir/npy.h"

namespace pipetrain::data {

namespace {

// ZIP record signatures (little-endian u32).
constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfCentralDir = 0x06054b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kZip64EndOfCentralDir = 0x06064b50;

// Bounds-checked little-endian reads from the archive bytes.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& path) : b_(bytes), path_(path) {}
  /// Whether [off, off + len) lies in the archive (written so that nothing overflows:
  /// zip64 offsets and sizes are any 64-bit value).
  bool fits(uint64_t off, uint64_t len) const { return off <= b_.size() && len <= b_.size() - off; }
  uint64_t le(uint64_t off, int n) const {
    if (!fits(off, static_cast<uint64_t>(n))) damaged("a record runs past the end");
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b_[off + i]);
    return v;
  }
  [[noreturn]] void damaged(const std::string& why) const {
    throw ModelError(path_ + ": damaged .npz (zip) archive: " + why);
  }
  size_t size() const { return b_.size(); }

 private:
  const std::string& b_;
  const std::string& path_;
};

struct Entry {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t comp = 0, uncomp = 0, local_offset = 0;
};

// Inflates in chunks, so that memory follows the data actually there: the
// declared size is only an upper bound to check, and a damaged header can
// declare gigabytes.
std::string inflate_raw(const char* src, uint64_t n, uint64_t out_size, const std::string& what) {
  constexpr size_t kChunk = size_t{1} << 20;
  // Deflate expands at most 1032:1, so this reserve holds any honest entry
  // (no reallocation while inflating) and bounds what a damaged one can claim.
  constexpr uint64_t kMaxRatio = 1032;
  std::string out;
  out.reserve(static_cast<size_t>(std::min(out_size, n * kMaxRatio + kChunk)));
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) throw ModelError(what + ": zlib init failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(src));
  zs.avail_in = static_cast<uInt>(n);
  int rc = Z_OK;
  while (rc == Z_OK && out.size() <= out_size) {
    const size_t have = out.size();
    out.resize(have + kChunk);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + have);
    zs.avail_out = static_cast<uInt>(kChunk);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(have + kChunk - zs.avail_out);
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || out.size() != out_size) throw ModelError(what + ": corrupt deflate data");
  return out;
}

}  // namespace

std::map<std::string, ir::Tensor> read_npz(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw ModelError(path + ": no such file");
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw ModelError(path + ": cannot open");
    std::ostringstream ss;
    ss << f.rdbuf();
    bytes = ss.str();
  }
  Reader r(bytes, path);
  if (bytes.size() < 22 || r.le(0, 4) != kLocalHeader)
    throw ModelError(path + ": not an .npz file (no zip signature)");

  // The end-of-central-directory record sits in the last 22 + (up to 65535 comment) bytes.
  int64_t eocd = -1;
  for (int64_t off = static_cast<int64_t>(bytes.size()) - 22;
       off >= 0 && off >= static_cast<int64_t>(bytes.size()) - 22 - 65535; --off) {
    if (r.le(static_cast<uint64_t>(off), 4) == kEndOfCentralDir) {
      eocd = off;
      break;
    }
  }
  if (eocd < 0) r.damaged("no end-of-central-directory record (truncated?)");
  uint64_t count = r.le(eocd + 10, 2), cd_offset = r.le(eocd + 16, 4);
  // Zip64: numpy writes its entries with force_zip64, and large archives need it.
  if (eocd >= 20 && r.le(eocd - 20, 4) == kZip64Locator) {
    uint64_t z = r.le(eocd - 20 + 8, 8);
    if (r.le(z, 4) != kZip64EndOfCentralDir) r.damaged("bad zip64 end record");
    count = r.le(z + 32, 8);
    cd_offset = r.le(z + 48, 8);
  }

  std::vector<Entry> entries;
  uint64_t off = cd_offset;
  for (uint64_t i = 0; i < count; ++i) {
    if (r.le(off, 4) != kCentralHeader) r.damaged("bad central directory entry");
    Entry e;
    e.flags = static_cast<uint16_t>(r.le(off + 8, 2));
    e.method = static_cast<uint16_t>(r.le(off + 10, 2));
    e.crc = static_cast<uint32_t>(r.le(off + 16, 4));
    e.comp = r.le(off + 20, 4);
    e.uncomp = r.le(off + 24, 4);
    uint64_t name_len = r.le(off + 28, 2), extra_len = r.le(off + 30, 2),
             comment_len = r.le(off + 32, 2);
    e.local_offset = r.le(off + 42, 4);
    if (!r.fits(off + 46, name_len)) r.damaged("entry name runs past the end");
    e.name = bytes.substr(off + 46, name_len);
    // The zip64 extra field (id 1) holds, in order, whichever sizes were saturated.
    uint64_t x = off + 46 + name_len, x_end = x + extra_len;
    while (x + 4 <= x_end) {
      uint64_t id = r.le(x, 2), len = r.le(x + 2, 2), p = x + 4;
      if (id == 1) {
        if (e.uncomp == 0xFFFFFFFF) {
          e.uncomp = r.le(p, 8);
          p += 8;
        }
        if (e.comp == 0xFFFFFFFF) {
          e.comp = r.le(p, 8);
          p += 8;
        }
        if (e.local_offset == 0xFFFFFFFF) e.local_offset = r.le(p, 8);
      }
      x += 4 + len;
    }
    entries.push_back(e);
    off += 46 + name_len + extra_len + comment_len;
  }

  std::map<std::string, ir::Tensor> out;
  for (const Entry& e : entries) {
    const std::string what = path + ":" + e.name;
    if (e.name.size() < 4 || e.name.compare(e.name.size() - 4, 4, ".npy") != 0) continue;
    if (e.flags & 1) throw ModelError(what + ": encrypted entries are not supported");
    if (r.le(e.local_offset, 4) != kLocalHeader) r.damaged("bad local header for " + e.name);
    uint64_t data =
        e.local_offset + 30 + r.le(e.local_offset + 26, 2) + r.le(e.local_offset + 28, 2);
    if (!r.fits(data, e.comp)) r.damaged(e.name + " is truncated");
    std::string raw;
    if (e.method == 0) {
      if (e.comp != e.uncomp) r.damaged(e.name + ": stored sizes disagree");
      raw = bytes.substr(data, e.comp);
    } else if (e.method == 8) {
      raw = inflate_raw(bytes.data() + data, e.comp, e.uncomp, what);
    } else {
      throw ModelError(what + ": zip compression method " + std::to_string(e.method) +
                       " is not supported (stored or deflate)");
    }
    uLong crc = crc32_z(0L, reinterpret_cast<const Bytef*>(raw.data()), raw.size());
    if (crc != e.crc) throw ModelError(what + ": CRC mismatch (corrupt archive)");
    std::istringstream in(raw);
    out[e.name.substr(0, e.name.size() - 4)] = ir::read_npy(in, what);
  }
  return out;
}

}  // namespace pipetrain::data
