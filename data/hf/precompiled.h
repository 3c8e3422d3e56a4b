// SentencePiece's precompiled normalization map (the "Precompiled" normalizer
// of T5's, ALBERT's and XLNet's converted tokenizers): a Darts double-array
// trie over UTF-8 keys whose leaves index NUL-terminated replacements. Applied
// as the tokenizers library does: each extended grapheme cluster shorter than 6
// bytes is looked up whole (the first prefix that matches replaces it), else
// each of its code points is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipetrain::data::hf {

class Precompiled {
 public:
  /// `charsmap`: the base64 text of tokenizer.json's precompiled_charsmap. ModelError when it
  /// is not base64 or its trie is cut short.
  explicit Precompiled(std::string_view charsmap_base64);
  std::string normalize(const std::string& text) const;

 private:
  /// The replacement of the shortest prefix of `chunk` the map holds.
  std::optional<std::string_view> transform(std::string_view chunk) const;

  std::vector<uint32_t> trie_;
  std::string replacements_;
};

}  // namespace pipetrain::data::hf
