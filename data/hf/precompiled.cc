#include "data/hf/precompiled.h"

#include <unicode/brkiter.h>
#include <unicode/locid.h>
#include <unicode/utext.h>

#include <memory>

#include "data/hf/unicode.h"
#include "ir/error.h"

namespace pipetrain::data::hf {

namespace {

std::string base64_decode(std::string_view s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t bits = 0;
  int n = 0;
  for (char c : s) {
    if (c == '=') break;
    const int v = value(c);
    if (v < 0) throw ModelError("Precompiled: precompiled_charsmap is not base64");
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if ((n += 6) >= 8) {
      n -= 8;
      out += static_cast<char>((bits >> n) & 0xFF);
    }
  }
  return out;
}

// Darts' packed unit: label, leaf flag, offset (and a value in a leaf's unit).
bool has_leaf(uint32_t u) {
  return (u >> 8) & 1;
}
uint32_t value(uint32_t u) {
  return u & ((1u << 31) - 1);
}
uint32_t label(uint32_t u) {
  return u & ((1u << 31) | 0xFF);
}
uint32_t offset(uint32_t u) {
  return (u >> 10) << ((u & (1u << 9)) >> 6);
}

}  // namespace

Precompiled::Precompiled(std::string_view charsmap_base64) {
  const std::string blob = base64_decode(charsmap_base64);
  auto u32_at = [&](size_t at) {
    return static_cast<uint32_t>(static_cast<unsigned char>(blob[at])) |
           static_cast<uint32_t>(static_cast<unsigned char>(blob[at + 1])) << 8 |
           static_cast<uint32_t>(static_cast<unsigned char>(blob[at + 2])) << 16 |
           static_cast<uint32_t>(static_cast<unsigned char>(blob[at + 3])) << 24;
  };
  if (blob.size() < 4) throw ModelError("Precompiled: precompiled_charsmap is empty");
  const uint32_t trie_bytes = u32_at(0);
  if (trie_bytes % 4 != 0 || trie_bytes == 0 || 4 + static_cast<size_t>(trie_bytes) > blob.size())
    throw ModelError("Precompiled: precompiled_charsmap's trie (" + std::to_string(trie_bytes) +
                     " bytes) does not fit its " + std::to_string(blob.size()) + " bytes");
  for (size_t at = 4; at < 4 + trie_bytes; at += 4) trie_.push_back(u32_at(at));
  replacements_ = blob.substr(4 + trie_bytes);
}

std::optional<std::string_view> Precompiled::transform(std::string_view chunk) const {
  size_t node = offset(trie_[0]);
  for (unsigned char c : chunk) {
    if (c == 0) break;
    node ^= c;
    if (node >= trie_.size()) return std::nullopt;
    const uint32_t unit = trie_[node];
    if (label(unit) != c) return std::nullopt;
    node ^= offset(unit);
    if (node >= trie_.size()) return std::nullopt;
    if (has_leaf(unit)) {
      const size_t begin = value(trie_[node]);
      if (begin >= replacements_.size()) return std::nullopt;
      const size_t end = replacements_.find('\0', begin);
      return std::string_view(replacements_)
          .substr(begin, (end == std::string::npos ? replacements_.size() : end) - begin);
    }
  }
  return std::nullopt;
}

std::string Precompiled::normalize(const std::string& text) const {
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::BreakIterator> graphemes(
      icu::BreakIterator::createCharacterInstance(icu::Locale::getRoot(), status));
  UText* ut = utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status);
  if (U_FAILURE(status)) {
    utext_close(ut);
    throw ModelError(std::string("Precompiled: ICU grapheme breaks: ") + u_errorName(status));
  }
  graphemes->setText(ut, status);
  std::string out;
  out.reserve(text.size());
  for (int32_t b = graphemes->first(), e = graphemes->next(); e != icu::BreakIterator::DONE;
       b = e, e = graphemes->next()) {
    const std::string_view g = std::string_view(text).substr(b, e - b);
    if (g.size() < 6) {
      if (const auto norm = transform(g)) {
        out += *norm;
        continue;
      }
    }
    for (size_t i = 0; i < g.size();) {
      const size_t len = std::min(utf8_length(static_cast<unsigned char>(g[i])), g.size() - i);
      const std::string_view c = g.substr(i, len);
      const auto norm = transform(c);
      out += norm ? *norm : c;
      i += len;
    }
  }
  utext_close(ut);
  return out;
}

}  // namespace pipetrain::data::hf
