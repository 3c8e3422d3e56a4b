// The parts of a Hugging Face tokenizer.json pipeline: normalizer,
// pre-tokenizer, model, post-processor and decoder, each built from its JSON
// object. Each follows the `tokenizers` library (0.13, the one transformers
// 4.30 uses) closely enough to give the same ids; offsets are not kept.
// A component pipetrain does not implement throws ModelError naming it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace pipetrain::data::hf {

using Json = nlohmann::json;

/// Text to normalized text.
using Normalizer = std::function<std::string(std::string)>;
/// A piece of normalized text to the words the model sees.
using PreTokenizer = std::function<std::vector<std::string>(const std::string&)>;
/// One sequence's ids framed with special tokens ([CLS] ... [SEP]), and a pair's
/// ([CLS] a [SEP] b [SEP]) with each id's token type. `frames` is false for the
/// processors that add no tokens (ByteLevel).
struct PostProcessor {
  std::function<std::vector<int64_t>(std::vector<int64_t>)> single;
  std::function<FramedPair(std::vector<int64_t>, std::vector<int64_t>)> pair;
  bool frames = true;
};
/// Tokens to the strings whose concatenation is the text (decode_chain).
using Decoder = std::function<std::vector<std::string>(std::vector<std::string>)>;

class Model {
 public:
  virtual ~Model() = default;
  /// Appends the ids of one pre-tokenized word.
  virtual void tokenize(const std::string& word, std::vector<int64_t>& ids) const = 0;
  virtual std::optional<int64_t> token_to_id(const std::string& token) const = 0;
  /// Empty when the id is not in the vocabulary.
  virtual std::optional<std::string> id_to_token(int64_t id) const = 0;
  /// One past the largest id.
  virtual int64_t vocab_size() const = 0;
};

Normalizer make_normalizer(const Json& j);
PreTokenizer make_pre_tokenizer(const Json& j);
std::unique_ptr<Model> make_model(const Json& j);
PostProcessor make_post_processor(const Json& j);
Decoder make_decoder(const Json& j);

/// j["type"], or ModelError naming the component (`what`: "normalizer", ...).
std::string component_type(const Json& j, const char* what);
/// j[key] when present and not null, else `fallback`.
template <typename T>
T value_or(const Json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<T>();
}
/// ModelError: "unsupported <what> '<type>' (pipetrain reads: <known>)".
[[noreturn]] void unsupported(const char* what, const std::string& type, const char* known);

/// A "pattern" object: {"String": s} or {"Regex": r}, as a regex source.
std::string pattern_source(const Json& pattern);

}  // namespace pipetrain::data::hf
