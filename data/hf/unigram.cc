// The Unigram model (SentencePiece's): the segmentation of highest total score
// by Viterbi over every vocabulary piece that matches, unknown characters
// scored below the lowest piece and consecutive unknowns fused, as the
// tokenizers' Unigram::encode_optimized does.
#include <limits>

#include "data/hf/unicode.h"
#include "data/hf/vocab.h"
#include "ir/error.h"

namespace pipetrain::data::hf {

namespace {

constexpr double kUnknownPenalty = 10.0;

class Unigram final : public Model {
 public:
  explicit Unigram(const Json& j) {
    const Json& pieces = j.at("vocab");
    if (!pieces.is_array()) throw ModelError("the Unigram vocab is not a list of [piece, score]");
    for (size_t id = 0; id < pieces.size(); ++id) {
      if (!pieces[id].is_array() || pieces[id].size() != 2 || !pieces[id][0].is_string() ||
          !pieces[id][1].is_number())
        throw ModelError("Unigram vocab entry " + std::to_string(id) + " is not [piece, score]");
      const auto piece = pieces[id].at(0).get<std::string>();
      const double score = pieces[id].at(1).get<double>();
      vocab_.add(piece, static_cast<int64_t>(id));
      scores_.push_back(score);
      min_score_ = std::min(min_score_, score);
      max_piece_bytes_ = std::max(max_piece_bytes_, piece.size());
    }
    if (j.contains("unk_id") && !j["unk_id"].is_null()) {
      unk_id_ = j["unk_id"].get<int64_t>();
      if (*unk_id_ < 0 || *unk_id_ >= vocab_.size())
        throw ModelError("Unigram unk_id " + std::to_string(*unk_id_) + " is outside the vocab");
    }
    byte_fallback_ = value_or(j, "byte_fallback", false);
  }

  void tokenize(const std::string& s, std::vector<int64_t>& ids) const override {
    for (const auto& token : segment(s)) {
      if (const auto id = vocab_.find(token)) {
        ids.push_back(*id);
        continue;
      }
      if (const auto bytes = byte_fallback_ ? vocab_.byte_ids(token) : std::nullopt) {
        ids.insert(ids.end(), bytes->begin(), bytes->end());
        continue;
      }
      if (!unk_id_) throw ModelError("Unigram: '" + token + "' is unknown and there is no unk_id");
      ids.push_back(*unk_id_);
    }
  }
  std::optional<int64_t> token_to_id(const std::string& t) const override { return vocab_.find(t); }
  std::optional<std::string> id_to_token(int64_t id) const override { return vocab_.token(id); }
  int64_t vocab_size() const override { return vocab_.size(); }

 private:
  std::vector<std::string> segment(const std::string& s) const {
    struct Best {
      int64_t id = -1;
      double score = 0;
      std::optional<size_t> starts_at;
    };
    const size_t n = s.size();
    std::vector<Best> ends_at(n + 1);
    const double unk_score = min_score_ - kUnknownPenalty;
    auto offer = [&](size_t begin, size_t end, int64_t id, double score) {
      Best& b = ends_at[end];
      const double candidate = score + ends_at[begin].score;
      if (!b.starts_at || candidate > b.score) b = {id, candidate, begin};
    };
    for (size_t begin = 0; begin < n;) {
      const size_t char_len =
          std::min(utf8_length(static_cast<unsigned char>(s[begin])), n - begin);
      bool single_char_piece = false;
      // The pieces that start here, shortest first (a trie's common-prefix order).
      for (size_t len = 1; len <= std::min(max_piece_bytes_, n - begin); ++len) {
        if (const auto id = vocab_.find(s.substr(begin, len))) {
          offer(begin, begin + len, *id, scores_[*id]);
          if (len == char_len) single_char_piece = true;
        }
      }
      if (!single_char_piece) {
        if (!unk_id_) throw ModelError("Unigram: an unknown character and no unk_id");
        offer(begin, begin + char_len, *unk_id_, unk_score);
      }
      begin += char_len;
    }
    std::vector<std::string> tokens;
    std::string unknown;  // a run of unknown characters, fused, read backwards
    for (size_t end = n; end > 0;) {
      const Best& b = ends_at[end];
      const size_t begin = *b.starts_at;
      if (unk_id_ && b.id == *unk_id_) {
        unknown.insert(0, s.substr(begin, end - begin));
      } else {
        if (!unknown.empty()) tokens.push_back(std::exchange(unknown, ""));
        tokens.push_back(*vocab_.token(b.id));
      }
      end = begin;
    }
    if (!unknown.empty()) tokens.push_back(unknown);
    std::reverse(tokens.begin(), tokens.end());
    return tokens;
  }

  Vocab vocab_;
  std::vector<double> scores_;
  double min_score_ = std::numeric_limits<double>::infinity();
  size_t max_piece_bytes_ = 0;
  std::optional<int64_t> unk_id_;
  bool byte_fallback_ = false;
};

}  // namespace

std::unique_ptr<Model> make_unigram(const Json& j) {
  return std::make_unique<Unigram>(j);
}

}  // namespace pipetrain::data::hf
