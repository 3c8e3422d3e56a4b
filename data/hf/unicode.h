// Unicode for the Hugging Face tokenizers (data/hf/): UTF-8 code points, the
// character classes their Rust implementation tests, normalization forms,
// lowercasing and regular expressions, all answered by ICU so that they follow
// the Unicode tables rather than hand-kept ranges.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pipetrain::data::hf {

/// Bytes of the UTF-8 sequence that starts with `lead` (1 for a stray byte).
size_t utf8_length(unsigned char lead);
/// The code points of valid UTF-8 text.
std::u32string to_u32(std::string_view utf8);
std::string to_utf8(std::u32string_view text);
void append_utf8(std::string& out, char32_t c);
/// Invalid sequences replaced by U+FFFD, one per maximal invalid subpart (as
/// Rust's String::from_utf8_lossy does).
std::string utf8_lossy(std::string_view bytes);

bool is_whitespace(char32_t c);       // the White_Space property (Rust char::is_whitespace)
bool is_punctuation(char32_t c);      // general category P*
bool is_other(char32_t c);            // general category C* (Cc Cf Cn Co Cs)
bool is_nonspacing_mark(char32_t c);  // general category Mn
bool is_mark(char32_t c);             // general category M* (Mn Mc Me)
bool is_numeric(char32_t c);          // general category N* (Rust char::is_numeric)
/// A regex \w character: Alphabetic, a mark, a decimal digit, a connector, ZWNJ or ZWJ.
bool is_word_character(char32_t c);

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
std::string normalize(std::string_view utf8, NormalForm form);
/// Full lowercase mapping, language-neutral (Rust str::to_lowercase).
std::string lowercase(std::string_view utf8);

/// Byte ranges [begin, end) of `text`.
using Ranges = std::vector<std::pair<size_t, size_t>>;

/// A regular expression in the Oniguruma dialect the tokenizers use, run by
/// ICU: \s and \S mean White_Space as they do there. Compiling a bad pattern
/// throws ModelError with ICU's reason.
class Regex {
 public:
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  /// The non-overlapping, non-empty matches, left to right.
  Ranges find_all(std::string_view text) const;
  /// `text` with every match replaced by `content`.
  std::string replace_all(std::string_view text, const std::string& content) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The regex source that matches `literal` exactly.
std::string regex_escape(std::string_view literal);

}  // namespace pipetrain::data::hf
