#include "data/hf/byte_level.h"

#include <array>

#include "data/hf/unicode.h"

namespace pipetrain::data::hf {

namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 take the code
// points from U+0100 on, in byte order.
const std::array<char32_t, 256>& byte_chars() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

}  // namespace

std::string bytes_to_chars(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, byte_chars()[b]);
  return out;
}

std::optional<unsigned char> char_to_byte(char32_t c) {
  if (c < 256 && byte_chars()[c] == c) return static_cast<unsigned char>(c);
  if (c >= 256 && c < 256 + 68) {
    for (int b = 0; b < 256; ++b)
      if (byte_chars()[b] == c) return static_cast<unsigned char>(b);
  }
  return std::nullopt;
}

}  // namespace pipetrain::data::hf
