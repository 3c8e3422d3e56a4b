// Pre-tokenizers: ByteLevel, BertPreTokenizer, Whitespace, WhitespaceSplit,
// Metaspace, Split, Punctuation, Digits, CharDelimiterSplit and Sequence.
#include "data/hf/byte_level.h"
#include "data/hf/components.h"
#include "data/hf/split.h"
#include "data/hf/unicode.h"
#include "ir/error.h"

namespace pipetrain::data::hf {

namespace {

// GPT-2's pattern, which the tokenizers' ByteLevel splits with.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

PreTokenizer split_on_chars(bool (*pred)(char32_t), SplitBehavior behavior) {
  return
      [pred, behavior](const std::string& s) { return split(s, char_matches(s, pred), behavior); };
}

PreTokenizer split_on_regex(const std::string& pattern, SplitBehavior behavior, bool invert) {
  auto regex = std::make_shared<Regex>(pattern);
  return [regex, behavior, invert](const std::string& s) {
    return split(s, regex->find_all(s), behavior, invert);
  };
}

PreTokenizer byte_level(const Json& j) {
  const bool prefix_space = value_or(j, "add_prefix_space", true);
  const bool use_regex = value_or(j, "use_regex", true);
  auto regex = std::make_shared<Regex>(kGpt2Pattern);
  return [=](const std::string& piece) {
    const std::string s = prefix_space && (piece.empty() || piece[0] != ' ') ? " " + piece : piece;
    std::vector<std::string> words =
        use_regex ? split(s, regex->find_all(s), SplitBehavior::kIsolated) : std::vector{s};
    for (auto& w : words) w = bytes_to_chars(w);
    return words;
  };
}

PreTokenizer metaspace(const Json& j) {
  const std::string replacement = j.at("replacement").get<std::string>();
  const bool prefix_space = value_or(j, "add_prefix_space", true);
  const std::u32string r32 = to_u32(replacement);
  if (r32.size() != 1)
    throw ModelError("Metaspace replacement '" + replacement + "' is not one character");
  const char32_t r = r32[0];
  return [=](const std::string& piece) {
    std::string s;
    for (char c : piece) {
      if (c == ' ')
        s += replacement;
      else
        s += c;
    }
    if (prefix_space && s.compare(0, replacement.size(), replacement) != 0) s = replacement + s;
    return split(s, char_matches(s, [r](char32_t c) { return c == r; }),
                 SplitBehavior::kMergedWithNext);
  };
}

bool is_bert_punctuation(char32_t c) {
  const bool ascii_punct = c < 0x80 && ((c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
                                        (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E));
  return ascii_punct || is_punctuation(c);
}

}  // namespace

PreTokenizer make_pre_tokenizer(const Json& j) {
  const std::string type = component_type(j, "pre_tokenizer");
  if (type == "ByteLevel") return byte_level(j);
  if (type == "Metaspace") return metaspace(j);
  if (type == "Whitespace") return split_on_regex(R"(\w+|[^\w\s]+)", SplitBehavior::kRemoved, true);
  if (type == "WhitespaceSplit") return split_on_chars(is_whitespace, SplitBehavior::kRemoved);
  if (type == "BertPreTokenizer") {
    return [](const std::string& s) {
      std::vector<std::string> out;
      for (const auto& word : split(s, char_matches(s, is_whitespace), SplitBehavior::kRemoved))
        for (auto& piece :
             split(word, char_matches(word, is_bert_punctuation), SplitBehavior::kIsolated))
          out.push_back(std::move(piece));
      return out;
    };
  }
  if (type == "Punctuation")
    return split_on_chars(is_bert_punctuation,
                          split_behavior(value_or<std::string>(j, "behavior", "Isolated")));
  if (type == "Digits")
    return split_on_chars(is_numeric, value_or(j, "individual_digits", false)
                                          ? SplitBehavior::kIsolated
                                          : SplitBehavior::kContiguous);
  if (type == "CharDelimiterSplit") {
    const std::u32string d = to_u32(j.at("delimiter").get<std::string>());
    if (d.size() != 1) throw ModelError("CharDelimiterSplit delimiter is not one character");
    const char32_t delimiter = d[0];
    return [delimiter](const std::string& s) {
      return split(s, char_matches(s, [delimiter](char32_t c) { return c == delimiter; }),
                   SplitBehavior::kRemoved);
    };
  }
  if (type == "Split")
    return split_on_regex(pattern_source(j.at("pattern")),
                          split_behavior(j.at("behavior").get<std::string>()),
                          value_or(j, "invert", false));
  if (type == "Sequence") {
    std::vector<PreTokenizer> parts;
    for (const auto& p : j.at("pretokenizers")) parts.push_back(make_pre_tokenizer(p));
    return [parts](const std::string& s) {
      std::vector<std::string> pieces{s};
      for (const auto& p : parts) {
        std::vector<std::string> next;
        for (const auto& piece : pieces)
          for (auto& w : p(piece)) next.push_back(std::move(w));
        pieces = std::move(next);
      }
      return pieces;
    };
  }
  unsupported("pre_tokenizer", type,
              "ByteLevel, BertPreTokenizer, Whitespace, WhitespaceSplit, Metaspace, Split, "
              "Punctuation, Digits, CharDelimiterSplit, Sequence");
}

}  // namespace pipetrain::data::hf
