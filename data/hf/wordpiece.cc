// WordPiece (BERT: the longest vocabulary prefix first, continuations marked
// "##") and WordLevel (a word is a token or unknown).
#include "data/hf/unicode.h"
#include "data/hf/vocab.h"
#include "ir/error.h"

namespace pipetrain::data::hf {

namespace {

class VocabModel : public Model {
 public:
  explicit VocabModel(const Json& j)
      : vocab_(Vocab::from_map(j.at("vocab"))),
        unk_(value_or<std::string>(j, "unk_token", "[UNK]")) {}
  std::optional<int64_t> token_to_id(const std::string& t) const override { return vocab_.find(t); }
  std::optional<std::string> id_to_token(int64_t id) const override { return vocab_.token(id); }
  int64_t vocab_size() const override { return vocab_.size(); }

 protected:
  int64_t unk_id() const { return vocab_.at(unk_, "unk_token"); }
  Vocab vocab_;
  std::string unk_;
};

class WordPiece final : public VocabModel {
 public:
  explicit WordPiece(const Json& j)
      : VocabModel(j),
        prefix_(value_or<std::string>(j, "continuing_subword_prefix", "##")),
        max_chars_(value_or<int64_t>(j, "max_input_chars_per_word", 100)) {}

  void tokenize(const std::string& word, std::vector<int64_t>& ids) const override {
    if (static_cast<int64_t>(to_u32(word).size()) > max_chars_) {
      ids.push_back(unk_id());
      return;
    }
    std::vector<int64_t> pieces;
    for (size_t start = 0; start < word.size();) {
      size_t end = word.size();
      std::optional<int64_t> found;
      while (start < end) {
        const std::string sub = (start > 0 ? prefix_ : "") + word.substr(start, end - start);
        if ((found = vocab_.find(sub))) break;
        // Back off by the last character.
        size_t last = end - 1;
        while (last > start && (static_cast<unsigned char>(word[last]) & 0xC0) == 0x80) --last;
        end = last;
      }
      if (!found) {
        ids.push_back(unk_id());
        return;
      }
      pieces.push_back(*found);
      start = end;
    }
    ids.insert(ids.end(), pieces.begin(), pieces.end());
  }

 private:
  std::string prefix_;
  int64_t max_chars_;
};

class WordLevel final : public VocabModel {
 public:
  explicit WordLevel(const Json& j) : VocabModel(j) {}
  void tokenize(const std::string& word, std::vector<int64_t>& ids) const override {
    const auto id = vocab_.find(word);
    ids.push_back(id ? *id : unk_id());
  }
};

}  // namespace

std::unique_ptr<Model> make_wordpiece(const Json& j) {
  return std::make_unique<WordPiece>(j);
}
std::unique_ptr<Model> make_wordlevel(const Json& j) {
  return std::make_unique<WordLevel>(j);
}

}  // namespace pipetrain::data::hf
