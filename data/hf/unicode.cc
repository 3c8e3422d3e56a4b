#include "data/hf/unicode.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utext.h>

#include "ir/error.h"

namespace pipetrain::data::hf {

size_t utf8_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return lead < 0xF8 ? 4 : 1;
}

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto lead = static_cast<unsigned char>(s[i]);
    size_t len = std::min(utf8_length(lead), s.size() - i);
    char32_t c = len == 1 ? lead : lead & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(c);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string to_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(out, c);
  return out;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const unsigned c = p[i];
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      lo = c == 0xE0 ? 0xA0 : 0x80;
      hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      lo = c == 0xF0 ? 0x90 : 0x80;
      hi = c == 0xF4 ? 0x8F : 0xBF;
    }
    // The longest valid prefix of the sequence: whole, it is copied; cut
    // short, it becomes one U+FFFD and decoding resumes after it.
    size_t valid = len == 0 ? 0 : 1;
    if (len > 0 && i + 1 < s.size() && p[i + 1] >= lo && p[i + 1] <= hi) {
      valid = 2;
      while (valid < len && i + valid < s.size() && (p[i + valid] & 0xC0) == 0x80) ++valid;
    }
    if (len > 0 && valid == len) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += std::max<size_t>(valid, 1);
    }
  }
  return out;
}

bool is_whitespace(char32_t c) {
  return u_isUWhiteSpace(static_cast<UChar32>(c));
}

bool is_punctuation(char32_t c) {
  return u_ispunct(static_cast<UChar32>(c));
}

bool is_other(char32_t c) {
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_UNASSIGNED:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE: return true;
    default: return false;
  }
}

bool is_nonspacing_mark(char32_t c) {
  return u_charType(static_cast<UChar32>(c)) == U_NON_SPACING_MARK;
}

bool is_mark(char32_t c) {
  const auto t = u_charType(static_cast<UChar32>(c));
  return t == U_NON_SPACING_MARK || t == U_COMBINING_SPACING_MARK || t == U_ENCLOSING_MARK;
}

bool is_numeric(char32_t c) {
  const auto t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_word_character(char32_t c) {
  const auto u = static_cast<UChar32>(c);
  const auto t = u_charType(u);
  return u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || is_mark(c) || t == U_DECIMAL_DIGIT_NUMBER ||
         t == U_CONNECTOR_PUNCTUATION || c == 0x200C || c == 0x200D;
}

namespace {

void check(UErrorCode status, const std::string& what) {
  if (U_FAILURE(status)) throw ModelError(what + ": " + u_errorName(status));
}

}  // namespace

std::string normalize(std::string_view utf8, NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case NormalForm::kNFC: n = icu::Normalizer2::getNFCInstance(status); break;
    case NormalForm::kNFD: n = icu::Normalizer2::getNFDInstance(status); break;
    case NormalForm::kNFKC: n = icu::Normalizer2::getNFKCInstance(status); break;
    case NormalForm::kNFKD: n = icu::Normalizer2::getNFKDInstance(status); break;
  }
  check(status, "ICU normalizer");
  const auto in = icu::UnicodeString::fromUTF8(icu::StringPiece(utf8.data(), utf8.size()));
  const icu::UnicodeString normalized = n->normalize(in, status);
  check(status, "ICU normalization");
  std::string out;
  return normalized.toUTF8String(out);
}

std::string lowercase(std::string_view utf8) {
  auto s = icu::UnicodeString::fromUTF8(icu::StringPiece(utf8.data(), utf8.size()));
  s.toLower(icu::Locale::getRoot());
  std::string out;
  return s.toUTF8String(out);
}

namespace {

// Oniguruma's \s and \S are the White_Space property; ICU's \s is narrower
// ([\t\n\f\r\p{Z}]: no U+000B, no U+0085), so the pattern names the property.
std::string onig_to_icu(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 's') {
        out += "\\p{White_Space}";
      } else if (next == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += pattern.substr(i, 2);
      }
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace

struct Regex::Impl {
  std::unique_ptr<icu::RegexPattern> pattern;
};

Regex::Regex(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError where{};
  impl_->pattern.reset(icu::RegexPattern::compile(
      icu::UnicodeString::fromUTF8(onig_to_icu(pattern)), 0, where, status));
  if (U_FAILURE(status))
    throw ModelError("regular expression '" + pattern + "': " + u_errorName(status) +
                     " at offset " + std::to_string(where.offset));
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

Ranges Regex::find_all(std::string_view text) const {
  UErrorCode status = U_ZERO_ERROR;
  // A UTF-8 UText: the matcher's native indices are byte offsets.
  UText* ut = utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status);
  check(status, "ICU text");
  std::unique_ptr<icu::RegexMatcher> m(impl_->pattern->matcher(status));
  Ranges out;
  if (U_SUCCESS(status)) {
    m->reset(ut);
    while (m->find(status) && U_SUCCESS(status)) {
      const auto b = static_cast<size_t>(m->start64(status));
      const auto e = static_cast<size_t>(m->end64(status));
      if (e > b) out.emplace_back(b, e);
    }
  }
  m.reset();
  utext_close(ut);
  check(status, "ICU regex");
  return out;
}

std::string Regex::replace_all(std::string_view text, const std::string& content) const {
  std::string out;
  size_t at = 0;
  for (const auto& [b, e] : find_all(text)) {
    out.append(text.substr(at, b - at));
    out += content;
    at = e;
  }
  out.append(text.substr(at));
  return out;
}

std::string regex_escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/ #&~").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace pipetrain::data::hf
