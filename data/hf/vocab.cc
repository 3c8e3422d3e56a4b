#include "data/hf/vocab.h"

#include <cstdio>

#include "ir/error.h"

namespace pipetrain::data::hf {

Vocab Vocab::from_map(const Json& j) {
  if (!j.is_object()) throw ModelError("the model's vocab is not an object of token: id");
  Vocab v;
  for (const auto& [token, id] : j.items()) v.add(token, id.get<int64_t>());
  return v;
}

void Vocab::add(const std::string& token, int64_t id) {
  if (id < 0 || id > (int64_t{1} << 31))
    throw ModelError("token '" + token + "' has the id " + std::to_string(id));
  ids_[token] = id;
  if (id >= size()) {
    tokens_.resize(id + 1);
    present_.resize(id + 1, false);
  }
  tokens_[id] = token;
  present_[id] = true;
}

int64_t Vocab::at(const std::string& token, const char* role) const {
  if (const auto id = find(token)) return *id;
  throw ModelError(std::string("the ") + role + " '" + token + "' is not in the vocabulary");
}

std::optional<std::vector<int64_t>> Vocab::byte_ids(const std::string& text) const {
  std::vector<int64_t> ids;
  for (unsigned char b : text) {
    const auto id = find(byte_token(b));
    if (!id) return std::nullopt;
    ids.push_back(*id);
  }
  return ids;
}

std::string byte_token(unsigned char b) {
  char s[8];
  std::snprintf(s, sizeof s, "<0x%02X>", b);
  return s;
}

}  // namespace pipetrain::data::hf
