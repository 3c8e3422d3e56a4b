// SentencePiece (Debian's libsentencepiece) as a pipetrain Tokenizer, loaded at
// run time from the pipetrain_sentencepiece module (data/sentencepiece/).
// Newlines: SentencePiece sees text a line at a time, so models trained here
// reserve a control piece "<nl>" that stands for a line break; encoding splits
// the text into lines and joins them with it, decoding turns it back into "\n".
// A model without it encodes the lines back to back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace pipetrain::data {

/// The model file's tokenizer; ModelError naming the file when it cannot be
/// read, or when pipetrain was built without SentencePiece.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_path);

/// The path of the SentencePiece module this process would load (the first
/// candidate that exists), or "unavailable: " and why (pipetrain --version).
std::string sentencepiece_module();

struct SentencePieceOptions {
  int64_t vocab_size = 4000;
  std::string model_type = "unigram";  // unigram, bpe, char or word
  /// Lines sampled for training (SentencePiece's input_sentence_size).
  int64_t max_lines = 1'000'000;
  uint64_t seed = 0;
};

/// Trains a model on the UTF-8 `text` (lines) and writes it to `out_model`
/// (a path ending in .model) whole or not at all. ModelError with
/// SentencePiece's own reason (for example a vocabulary too large for the text).
void train_sentencepiece(const std::string& text, const std::string& out_model,
                         const SentencePieceOptions& options);

}  // namespace pipetrain::data
