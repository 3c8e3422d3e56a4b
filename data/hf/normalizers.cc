// Normalizers: BertNormalizer, Lowercase, StripAccents, NFC/NFD/NFKC/NFKD,
// Nmt, Replace, Prepend, Strip and Sequence.
#include <algorithm>

#include "data/hf/components.h"
#include "data/hf/precompiled.h"
#include "data/hf/unicode.h"
#include "ir/error.h"

namespace pipetrain::data::hf {

namespace {

// Maps or drops code points one at a time.
template <typename F>
std::string each_char(const std::string& s, F&& f) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : to_u32(s)) f(c, out);
  return out;
}

bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// Code point by code point, as the tokenizers do (no final-sigma context).
std::string lowercase_chars(const std::string& s) {
  if (std::all_of(s.begin(), s.end(), [](char c) { return (c & 0x80) == 0; })) {
    std::string out = s;
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  }
  return each_char(s, [](char32_t c, std::string& out) {
    if (c < 0x80) {
      append_utf8(out, c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    } else {
      std::string one;
      append_utf8(one, c);
      out += lowercase(one);
    }
  });
}

Normalizer bert_normalizer(const Json& j) {
  const bool clean_text = value_or(j, "clean_text", true);
  const bool chinese = value_or(j, "handle_chinese_chars", true);
  const bool lower = value_or(j, "lowercase", true);
  const bool strip_accents = value_or(j, "strip_accents", lower);
  return [=](std::string s) {
    if (clean_text) {
      s = each_char(s, [](char32_t c, std::string& out) {
        const bool tab_or_newline = c == '\t' || c == '\n' || c == '\r';
        if (c == 0 || c == 0xFFFD || (!tab_or_newline && is_other(c))) return;
        append_utf8(out, tab_or_newline || is_whitespace(c) ? U' ' : c);
      });
    }
    if (chinese) {
      s = each_char(s, [](char32_t c, std::string& out) {
        if (is_chinese_char(c)) out += ' ';
        append_utf8(out, c);
        if (is_chinese_char(c)) out += ' ';
      });
    }
    if (strip_accents) {
      s = each_char(normalize(s, NormalForm::kNFD), [](char32_t c, std::string& out) {
        if (!is_nonspacing_mark(c)) append_utf8(out, c);
      });
    }
    return lower ? lowercase_chars(s) : s;
  };
}

Normalizer nmt() {
  return [](const std::string& s) {
    return each_char(s, [](char32_t c, std::string& out) {
      if ((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
          c == 0x8F || c == 0x9F)
        return;
      const bool space = c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 ||
                         (c >= 0x200B && c <= 0x200F) || c == 0x2028 || c == 0x2029 ||
                         c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
      append_utf8(out, space ? U' ' : c);
    });
  };
}

// Trims White_Space code points from either end.
std::string strip(const std::string& s, bool left, bool right) {
  const std::u32string u = to_u32(s);
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && is_whitespace(u[b])) ++b;
  if (right)
    while (e > b && is_whitespace(u[e - 1])) --e;
  return to_utf8(std::u32string_view(u).substr(b, e - b));
}

}  // namespace

Normalizer make_normalizer(const Json& j) {
  const std::string type = component_type(j, "normalizer");
  if (type == "BertNormalizer") return bert_normalizer(j);
  if (type == "Lowercase") return lowercase_chars;
  if (type == "StripAccents")
    return [](const std::string& s) {
      return each_char(s, [](char32_t c, std::string& out) {
        if (!is_mark(c)) append_utf8(out, c);
      });
    };
  if (type == "NFC") return [](const std::string& s) { return normalize(s, NormalForm::kNFC); };
  if (type == "NFD") return [](const std::string& s) { return normalize(s, NormalForm::kNFD); };
  if (type == "NFKC") return [](const std::string& s) { return normalize(s, NormalForm::kNFKC); };
  if (type == "NFKD") return [](const std::string& s) { return normalize(s, NormalForm::kNFKD); };
  if (type == "Nmt") return nmt();
  if (type == "Replace") {
    auto regex = std::make_shared<Regex>(pattern_source(j.at("pattern")));
    const std::string content = j.at("content").get<std::string>();
    return [regex, content](const std::string& s) { return regex->replace_all(s, content); };
  }
  if (type == "Prepend") {
    const std::string prefix = j.at("prepend").get<std::string>();
    return [prefix](const std::string& s) { return s.empty() ? s : prefix + s; };
  }
  if (type == "Strip") {
    const bool left = value_or(j, "strip_left", true), right = value_or(j, "strip_right", true);
    return [left, right](const std::string& s) { return strip(s, left, right); };
  }
  if (type == "Precompiled") {
    auto map = std::make_shared<Precompiled>(j.at("precompiled_charsmap").get<std::string>());
    return [map](const std::string& s) { return map->normalize(s); };
  }
  if (type == "Sequence") {
    std::vector<Normalizer> parts;
    for (const auto& n : j.at("normalizers")) parts.push_back(make_normalizer(n));
    return [parts](std::string s) {
      for (const auto& n : parts) s = n(std::move(s));
      return s;
    };
  }
  unsupported("normalizer", type,
              "BertNormalizer, Lowercase, StripAccents, NFC, NFD, NFKC, NFKD, Nmt, Precompiled, "
              "Replace, Prepend, Strip, Sequence");
}

}  // namespace pipetrain::data::hf
