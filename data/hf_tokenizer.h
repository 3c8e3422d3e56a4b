// Hugging Face tokenizer.json files (GPT-2's and RoBERTa's byte-level BPE,
// BERT's WordPiece, Llama's BPE with byte fallback, Unigram) read natively:
// the normalizer, pre-tokenizer, model, post-processor and decoder pipeline of
// the `tokenizers` library, in C++ (data/hf/), with its added and special tokens.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace pipetrain::data {

/// The tokenizer of a tokenizer.json. ModelError naming the file and the first
/// thing wrong: not JSON, a missing part, or a component pipetrain does not
/// implement (named, with the ones it does).
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path);

}  // namespace pipetrain::data
