// A token vocabulary both ways, shared by the tokenizer.json models.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/hf/components.h"

namespace pipetrain::data::hf {

class Vocab {
 public:
  Vocab() = default;
  /// {"token": id, ...}; ModelError on a negative id.
  static Vocab from_map(const Json& j);
  void add(const std::string& token, int64_t id);
  std::optional<int64_t> find(const std::string& token) const {
    const auto it = ids_.find(token);
    return it == ids_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
  /// The id of a token the model names (unk_token, ...), or ModelError.
  int64_t at(const std::string& token, const char* role) const;
  std::optional<std::string> token(int64_t id) const {
    if (id < 0 || id >= static_cast<int64_t>(tokens_.size()) || !present_[id]) return std::nullopt;
    return tokens_[id];
  }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  /// SentencePiece-style byte fallback: the ids of `text`'s bytes as <0xXX> tokens, when the
  /// vocabulary holds every one.
  std::optional<std::vector<int64_t>> byte_ids(const std::string& text) const;

 private:
  std::unordered_map<std::string, int64_t> ids_;
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
};

/// "<0x0A>": the token SentencePiece-style byte fallback uses for a byte.
std::string byte_token(unsigned char b);

}  // namespace pipetrain::data::hf
