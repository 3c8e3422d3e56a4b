// The BPE model: a word's characters (or byte-fallback tokens) merged by rank,
// the lowest-ranked adjacent pair first and the leftmost among equals, as the
// tokenizers' Word::merge_all does.
#include <queue>

#include "data/hf/unicode.h"
#include "data/hf/vocab.h"
#include "ir/error.h"

namespace pipetrain::data::hf {

namespace {

struct PairHash {
  size_t operator()(const std::pair<int64_t, int64_t>& p) const {
    return std::hash<int64_t>()(p.first * 1'000'003 + p.second);
  }
};

class Bpe final : public Model {
 public:
  explicit Bpe(const Json& j) : vocab_(Vocab::from_map(j.at("vocab"))) {
    if (value_or(j, "dropout", 0.0) > 0.0)
      throw ModelError("BPE with dropout is not supported (it samples at encoding time)");
    unk_ = value_or<std::string>(j, "unk_token", "");
    prefix_ = value_or<std::string>(j, "continuing_subword_prefix", "");
    suffix_ = value_or<std::string>(j, "end_of_word_suffix", "");
    fuse_unk_ = value_or(j, "fuse_unk", false);
    byte_fallback_ = value_or(j, "byte_fallback", false);
    const Json& merges = j.at("merges");
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      std::string a, b;
      if (merges[rank].is_array()) {  // newer tokenizers write [a, b]
        a = merges[rank].at(0).get<std::string>();
        b = merges[rank].at(1).get<std::string>();
      } else {
        const std::string m = merges[rank].get<std::string>();
        const size_t space = m.find(' ');
        if (space == std::string::npos || m.find(' ', space + 1) != std::string::npos)
          throw ModelError("BPE merge " + std::to_string(rank) + " '" + m +
                           "' is not two tokens separated by a space");
        a = m.substr(0, space);
        b = m.substr(space + 1);
      }
      const std::string merged = a + b.substr(std::min(prefix_.size(), b.size()));
      int64_t ids[3];
      const std::string* tokens[3] = {&a, &b, &merged};
      for (int k = 0; k < 3; ++k) {
        const auto id = vocab_.find(*tokens[k]);
        if (!id)
          throw ModelError("BPE merge " + std::to_string(rank) + " ('" + a + " " + b +
                           "'): the token '" + *tokens[k] + "' is not in the vocabulary");
        ids[k] = *id;
      }
      merges_[{ids[0], ids[1]}] = {static_cast<int64_t>(rank), ids[2]};
    }
    if (!unk_.empty()) vocab_.at(unk_, "unk_token");
  }

  void tokenize(const std::string& word, std::vector<int64_t>& ids) const override {
    std::vector<int64_t> symbols = initial_symbols(word);
    merge_all(symbols);
    ids.insert(ids.end(), symbols.begin(), symbols.end());
  }
  std::optional<int64_t> token_to_id(const std::string& t) const override { return vocab_.find(t); }
  std::optional<std::string> id_to_token(int64_t id) const override { return vocab_.token(id); }
  int64_t vocab_size() const override { return vocab_.size(); }

 private:
  std::vector<int64_t> initial_symbols(const std::string& word) const {
    std::vector<int64_t> symbols;
    std::optional<int64_t> pending_unk;  // an unknown run not yet added (fuse_unk)
    for (size_t i = 0; i < word.size();) {
      const size_t len =
          std::min(utf8_length(static_cast<unsigned char>(word[i])), word.size() - i);
      std::string s = word.substr(i, len);
      if (i > 0) s = prefix_ + s;
      i += len;
      if (i == word.size()) s += suffix_;
      if (const auto id = vocab_.find(s)) {
        if (pending_unk) symbols.push_back(*std::exchange(pending_unk, std::nullopt));
        symbols.push_back(*id);
        continue;
      }
      if (const auto bytes = byte_fallback_ ? vocab_.byte_ids(s) : std::nullopt) {
        symbols.insert(symbols.end(), bytes->begin(), bytes->end());  // a pending unknown waits,
        continue;                                                     // as in the tokenizers
      }
      if (unk_.empty()) continue;  // no unk_token: the character is dropped
      const int64_t unk = *vocab_.find(unk_);
      if (pending_unk && !fuse_unk_) symbols.push_back(*pending_unk);
      pending_unk = unk;
    }
    if (pending_unk) symbols.push_back(*pending_unk);
    return symbols;
  }

  void merge_all(std::vector<int64_t>& ids) const {
    const int n = static_cast<int>(ids.size());
    std::vector<int> prev(n), next(n);
    std::vector<bool> gone(n, false);
    for (int i = 0; i < n; ++i) {
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    struct Candidate {
      int64_t rank;
      int pos;
      int64_t new_id;
      bool operator>(const Candidate& o) const {
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    auto push = [&](int pos) {
      if (pos < 0 || next[pos] < 0) return;
      const auto it = merges_.find({ids[pos], ids[next[pos]]});
      if (it != merges_.end()) queue.push({it->second.first, pos, it->second.second});
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      if (gone[top.pos] || next[top.pos] < 0) continue;
      const int right = next[top.pos];
      const auto it = merges_.find({ids[top.pos], ids[right]});
      if (it == merges_.end() || it->second.second != top.new_id) continue;  // stale
      ids[top.pos] = top.new_id;
      gone[right] = true;
      next[top.pos] = next[right];
      if (next[right] >= 0) prev[next[right]] = top.pos;
      push(prev[top.pos]);
      push(top.pos);
    }
    std::vector<int64_t> out;
    for (int i = 0; i < n; ++i)
      if (!gone[i]) out.push_back(ids[i]);
    ids = std::move(out);
  }

  Vocab vocab_;
  std::unordered_map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>, PairHash> merges_;
  std::string unk_, prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false;
};

}  // namespace

std::unique_ptr<Model> make_bpe(const Json& j) {
  return std::make_unique<Bpe>(j);
}

}  // namespace pipetrain::data::hf
