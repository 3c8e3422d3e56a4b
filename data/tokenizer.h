// Tokenizers: text to token ids and back, behind one interface: the built-in
// byte-level one (every UTF-8 byte is a token, vocab 256: needs no training
// and covers any text) and SentencePiece models (data/sentencepiece.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pipetrain::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  /// Ids outside the vocabulary throw ModelError.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  /// "bytes", for messages.
  virtual std::string describe() const = 0;
};

/// The SentencePiece model at `model_path` (a .model file), or the byte-level
/// tokenizer when the path is empty.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& model_path = "");

/// The text files a `text:` source reads: `path` itself, or a directory's
/// *.txt and extensionless regular files (recursively, sorted; symlinks and
/// hidden files skipped). ModelError when there are none.
std::vector<std::string> text_files(const std::string& path);

/// The file's bytes after checking they are UTF-8 (ModelError naming the
/// file and the byte offset of the first bad sequence).
std::string read_utf8_file(const std::string& path);

}  // namespace pipetrain::data
