// Tokenizers: text to token ids and back, behind one interface: the built-in
// byte-level one (every UTF-8 byte is a token, vocab 256: needs no training
// and covers any text), SentencePiece models (data/sentencepiece.h) and Hugging
// Face tokenizer.json files (data/hf_tokenizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pipetrain::data {

/// Two texts as one sequence: the ids, and each id's segment (its token type).
struct FramedPair {
  std::vector<int64_t> ids, type_ids;
};

/// `a` then `b`, types 0 then 1: a pair without special tokens.
inline FramedPair concat_pair(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  FramedPair out{std::move(a), {}};
  out.type_ids.assign(out.ids.size(), 0);
  out.ids.insert(out.ids.end(), b.begin(), b.end());
  out.type_ids.resize(out.ids.size(), 1);
  return out;
}

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// The text's ids as a stream (no special tokens: what a language model reads).
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  /// `ids` as one sequence, framed with the tokenizer's special tokens (BERT's
  /// [CLS] ... [SEP], Llama's <s>); unchanged by tokenizers without them.
  virtual std::vector<int64_t> frame(std::vector<int64_t> ids) const { return ids; }
  std::vector<int64_t> encode_with_special_tokens(const std::string& text) const {
    return frame(encode(text));
  }
  /// Two texts' ids as one sequence pair, framed as the tokenizer frames pairs
  /// (BERT's [CLS] a [SEP] b [SEP], types 0 then 1; RoBERTa's <s> a </s></s> b
  /// </s>, types 0); a then b, types 0 then 1, by tokenizers without special tokens.
  virtual FramedPair frame_pair(std::vector<int64_t> a, std::vector<int64_t> b) const {
    return concat_pair(std::move(a), b);
  }
  /// The id that pads a batch of sequences (masked out by attention_mask).
  virtual int64_t pad_id() const { return 0; }
  /// Special tokens are left out.
  /// Ids outside the vocabulary throw ModelError.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  /// "bytes", for messages.
  virtual std::string describe() const = 0;
};

/// The tokenizer of `model_path`: a Hugging Face tokenizer.json (a path ending
/// in .json), a SentencePiece .model, or the byte-level tokenizer when empty.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& model_path = "");

/// The text files a `text:` source reads: `path` itself, or a directory's
/// *.txt and extensionless regular files (recursively, sorted; symlinks and
/// hidden files skipped). ModelError when there are none.
std::vector<std::string> text_files(const std::string& path);

/// The file's bytes after checking they are UTF-8 (ModelError naming the
/// file and the byte offset of the first bad sequence).
std::string read_utf8_file(const std::string& path);

}  // namespace pipetrain::data
