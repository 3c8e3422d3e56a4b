// A tokenizer.json end to end: added tokens split out (before normalizing for
// special tokens, after it for the others), then normalizer, pre-tokenizer and
// model on the rest; the post-processor adds special tokens, the decoder turns
// tokens back into text.
#include <fstream>
#include <sstream>

#include "data/hf/components.h"
#include "data/hf/unicode.h"
#include "data/hf_tokenizer.h"
#include "ir/error.h"

namespace pipetrain::data {

namespace {

using hf::Json;

struct AddedToken {
  std::string content;  // as matched: normalized when `normalized` is set
  int64_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// Whether the text beside an added token is a word (Rust regex's \w), for single_word.
bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return hf::is_word_character(hf::to_u32(s.substr(i))[0]);
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  return hf::is_word_character(
      hf::to_u32(s.substr(0, hf::utf8_length(static_cast<unsigned char>(s[0]))))[0]);
}

/// A piece of the input: text still to tokenize, or an added token's id.
struct Piece {
  std::string text;
  std::optional<int64_t> added;
};

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(const Json& j, std::string path) : path_(std::move(path)) {
    if (!j.is_object() || !j.contains("model"))
      throw ModelError("not a tokenizer.json (no \"model\")");
    model_ = hf::make_model(j["model"]);
    if (j.contains("normalizer") && !j["normalizer"].is_null())
      normalizer_ = hf::make_normalizer(j["normalizer"]);
    if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null())
      pre_tokenizer_ = hf::make_pre_tokenizer(j["pre_tokenizer"]);
    if (j.contains("post_processor") && !j["post_processor"].is_null())
      post_processor_ = hf::make_post_processor(j["post_processor"]);
    if (j.contains("decoder") && !j["decoder"].is_null()) decoder_ = hf::make_decoder(j["decoder"]);
    vocab_size_ = model_->vocab_size();
    for (const auto& t : j.value("added_tokens", Json::array())) {
      AddedToken a;
      a.content = t.at("content").get<std::string>();
      a.id = t.at("id").get<int64_t>();
      a.single_word = hf::value_or(t, "single_word", false);
      a.lstrip = hf::value_or(t, "lstrip", false);
      a.rstrip = hf::value_or(t, "rstrip", false);
      a.normalized = hf::value_or(t, "normalized", false);
      a.special = hf::value_or(t, "special", false);
      if (a.id < 0) throw ModelError("added token '" + a.content + "' has a negative id");
      vocab_size_ = std::max(vocab_size_, a.id + 1);
      added_by_id_[a.id] = a;
      if (a.content.empty()) continue;
      if (a.normalized && normalizer_) a.content = normalizer_(a.content);
      (a.normalized ? normalized_added_ : raw_added_).push_back(a);
    }
    // Padding as the file configures it, else a special token that names itself so.
    if (j.contains("padding") && j["padding"].is_object() && j["padding"].contains("pad_id")) {
      pad_id_ = j["padding"]["pad_id"].get<int64_t>();
    } else {
      auto id_of = [&](const std::string& name) -> std::optional<int64_t> {
        for (const auto& [id, a] : added_by_id_)
          if (a.content == name) return id;
        return model_->token_to_id(name);
      };
      for (const char* name : {"[PAD]", "<pad>", "<|padding|>"}) {
        if (const auto id = id_of(name)) {
          pad_id_ = *id;
          break;
        }
      }
    }
  }

  std::vector<int64_t> encode(const std::string& text) const override {
    std::vector<Piece> pieces;
    for (auto& raw : split_added(text, raw_added_)) {
      if (raw.added) {
        pieces.push_back(std::move(raw));
        continue;
      }
      const std::string normalized = normalizer_ ? normalizer_(raw.text) : raw.text;
      for (auto& p : split_added(normalized, normalized_added_)) pieces.push_back(std::move(p));
    }
    std::vector<int64_t> ids;
    for (const auto& p : pieces) {
      if (p.added) {
        ids.push_back(*p.added);
        continue;
      }
      if (!pre_tokenizer_) {
        model_->tokenize(p.text, ids);
        continue;
      }
      for (const auto& word : pre_tokenizer_(p.text)) model_->tokenize(word, ids);
    }
    return ids;
  }

  std::vector<int64_t> frame(std::vector<int64_t> ids) const override {
    return post_processor_.single ? post_processor_.single(std::move(ids)) : ids;
  }

  FramedPair frame_pair(std::vector<int64_t> a, std::vector<int64_t> b) const override {
    return post_processor_.pair ? post_processor_.pair(std::move(a), std::move(b))
                                : concat_pair(std::move(a), b);
  }

  int64_t pad_id() const override { return pad_id_; }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::vector<std::string> tokens;
    for (int64_t id : ids) {
      if (const auto it = added_by_id_.find(id); it != added_by_id_.end()) {
        if (!it->second.special) tokens.push_back(it->second.content);
        continue;
      }
      const auto token = model_->id_to_token(id);
      if (!token)
        throw ModelError(path_ + ": id " + std::to_string(id) + " is outside the vocabulary [0, " +
                         std::to_string(vocab_size_) + ")");
      tokens.push_back(*token);
    }
    std::string text;
    if (!decoder_) {
      for (size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
      return text;
    }
    for (const auto& s : decoder_(std::move(tokens))) text += s;
    return text;
  }

  int64_t vocab_size() const override { return vocab_size_; }
  std::string describe() const override { return path_; }

 private:
  // The tokenizers' AddedVocabulary::find_matches: leftmost-longest matches,
  // single_word, lstrip and rstrip honoured.
  static std::vector<Piece> split_added(const std::string& s,
                                        const std::vector<AddedToken>& added) {
    if (added.empty() || s.empty())
      return s.empty() ? std::vector<Piece>{} : std::vector<Piece>{{s, {}}};
    std::vector<Piece> out;
    size_t done = 0;
    for (size_t i = 0; i < s.size();) {
      const AddedToken* best = nullptr;
      for (const auto& a : added)
        if (s.compare(i, a.content.size(), a.content) == 0 &&
            (!best || a.content.size() > best->content.size()))
          best = &a;
      if (!best) {
        ++i;
        continue;
      }
      size_t start = i, stop = i + best->content.size();
      i = stop;
      if (best->single_word &&
          ((start > 0 && ends_with_word(std::string_view(s).substr(0, start))) ||
           (stop < s.size() && starts_with_word(std::string_view(s).substr(stop)))))
        continue;
      if (best->lstrip) {
        size_t b = start;
        while (b > 0) {
          size_t c = b - 1;
          while (c > 0 && (static_cast<unsigned char>(s[c]) & 0xC0) == 0x80) --c;
          if (!hf::is_whitespace(hf::to_u32(std::string_view(s).substr(c, b - c))[0])) break;
          b = c;
        }
        start = std::max(b, done);
      }
      if (best->rstrip) {
        while (stop < s.size()) {
          const size_t len = hf::utf8_length(static_cast<unsigned char>(s[stop]));
          if (!hf::is_whitespace(hf::to_u32(std::string_view(s).substr(stop, len))[0])) break;
          stop += len;
        }
        i = std::max(i, stop);
      }
      if (done < start) out.push_back({s.substr(done, start - done), {}});
      out.push_back({"", best->id});
      done = stop;
    }
    if (done < s.size()) out.push_back({s.substr(done), {}});
    return out;
  }

  std::string path_;
  std::unique_ptr<hf::Model> model_;
  hf::Normalizer normalizer_;
  hf::PreTokenizer pre_tokenizer_;
  hf::PostProcessor post_processor_;
  hf::Decoder decoder_;
  std::vector<AddedToken> raw_added_, normalized_added_;
  std::map<int64_t, AddedToken> added_by_id_;
  int64_t vocab_size_ = 0;
  int64_t pad_id_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ModelError(path + ": cannot open");
  try {
    const Json j = Json::parse(f);
    return std::make_unique<HfTokenizer>(j, path);
  } catch (const Json::exception& e) {
    throw ModelError(path + ": not a valid tokenizer.json: " + e.what());
  } catch (const ModelError& e) {
    throw ModelError(path + ": " + e.what());
  }
}

}  // namespace pipetrain::data
