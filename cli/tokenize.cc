// `pipetrain tokenize`: trains a SentencePiece model on text (a file or a
// directory of text files) for `train --data text:PATH --tokenizer tok.model`,
// or runs any tokenizer (a tokenizer.json, a .model) over a file: `--encode
// FILE -o ids.npy` writes each line's ids, `--decode ids.npy` prints the text.
#include <fmt/core.h>

#include <chrono>
#include <iostream>

#include "cli/commands.h"
#include "data/sentencepiece.h"
#include "data/tokenizer.h"
#include "ir/error.h"
#include "ir/npy.h"

namespace pipetrain::cli {

namespace {

struct TokenizeArgs {
  std::string path;
  std::string output;
  std::string tokenizer;
  std::string encode;
  std::string decode;
  bool no_special_tokens = false;
  data::SentencePieceOptions spm;
};

void train_model(const TokenizeArgs& a) {
  std::string text;
  const auto files = data::text_files(a.path);
  for (const auto& file : files) {
    text += data::read_utf8_file(file);
    if (!text.empty() && text.back() != '\n') text += '\n';
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw ModelError(a.path + ": the corpus is empty (no text)");
  fmt::print("training a SentencePiece {} model, vocab {}, on {} file(s), {:.1f} MB ...\n",
             a.spm.model_type, a.spm.vocab_size, files.size(), text.size() / 1e6);
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  data::train_sentencepiece(text, a.output, a.spm);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto tokenizer = data::make_tokenizer(a.output);
  const auto ids = tokenizer->encode(text);
  fmt::print("wrote {} in {:.1f} s: vocab {}, the corpus is {} tokens ({:.2f} bytes per token)\n",
             a.output, seconds, tokenizer->vocab_size(), ids.size(),
             static_cast<double>(text.size()) / static_cast<double>(ids.size()));
}

// One row of ids per line of the file (a final newline ends the last line),
// padded with -1 to the longest.
void encode_file(const TokenizeArgs& a) {
  const auto tokenizer = data::make_tokenizer(a.tokenizer);
  const std::string text = data::read_utf8_file(a.encode);
  std::vector<std::vector<int64_t>> rows;
  size_t longest = 0, total = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    rows.push_back(a.no_special_tokens ? tokenizer->encode(line)
                                       : tokenizer->encode_with_special_tokens(line));
    longest = std::max(longest, rows.back().size());
    total += rows.back().size();
    at = end + 1;
  }
  if (rows.empty()) throw ModelError(a.encode + ": no lines to encode");
  std::vector<int64_t> flat(rows.size() * longest, -1);
  for (size_t r = 0; r < rows.size(); ++r)
    std::copy(rows[r].begin(), rows[r].end(), flat.begin() + r * longest);
  ir::save_npy(ir::Tensor::from_i64(
                   flat, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(longest)}),
               a.output);
  fmt::print("wrote {}: {} lines, {} tokens, the longest line {} ({}, vocab {})\n", a.output,
             rows.size(), total, longest, tokenizer->describe(), tokenizer->vocab_size());
}

// Each row's text on a line of its own; -1 is padding.
void decode_file(const TokenizeArgs& a) {
  const auto tokenizer = data::make_tokenizer(a.tokenizer);
  const ir::Tensor ids = ir::load_npy(a.decode);
  if (ids.dtype() != ir::DType::kI64 || ids.shape().empty() || ids.shape().size() > 2)
    throw ModelError(a.decode + ": token ids must be a 1-D or 2-D integer array (it is " +
                     ir::dtype_name(ids.dtype()) + " of rank " +
                     std::to_string(ids.shape().size()) + ")");
  const int64_t cols = ids.shape().back();
  const int64_t rows = ids.shape().size() == 2 ? ids.shape()[0] : 1;
  const int64_t* p = ids.data<int64_t>();
  std::string out;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int64_t> row;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t id = p[r * cols + c];
      if (id == -1) continue;
      if (id < 0 || id >= tokenizer->vocab_size())
        throw ModelError(a.decode + ": row " + std::to_string(r) + " holds the id " +
                         std::to_string(id) + ", outside the vocabulary [0, " +
                         std::to_string(tokenizer->vocab_size()) + ")");
      row.push_back(id);
    }
    out += tokenizer->decode(row);
    out += '\n';
  }
  std::cout << out << std::flush;
}

void tokenize(const TokenizeArgs& a) {
  const int modes = !a.path.empty() + !a.encode.empty() + !a.decode.empty();
  if (modes != 1)
    throw ModelError(
        "tokenize: give one of PATH (train a SentencePiece model), --encode FILE or --decode "
        "FILE");
  if (!a.path.empty()) {
    if (a.output.empty()) throw ModelError("tokenize PATH: -o NAME.model is required");
    if (!a.tokenizer.empty())
      throw ModelError("tokenize PATH trains a tokenizer; --tokenizer is for --encode/--decode");
    return train_model(a);
  }
  if (a.tokenizer.empty())
    throw ModelError(
        "tokenize --encode/--decode: --tokenizer (a tokenizer.json or .model) is "
        "required");
  if (!a.encode.empty()) {
    if (a.output.empty()) throw ModelError("tokenize --encode: -o ids.npy is required");
    return encode_file(a);
  }
  decode_file(a);
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tokenize", "Train a SentencePiece tokenizer on text, or encode/decode with a tokenizer");
  auto a = std::make_shared<TokenizeArgs>();
  cmd->add_option("path", a->path, "A UTF-8 text file or a directory of them to train on");
  cmd->add_option("-o,--output", a->output,
                  "The model to write (NAME.model), or the ids of --encode (NAME.npy)");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "For --encode/--decode: a Hugging Face tokenizer.json or a SentencePiece .model");
  cmd->add_option("--encode", a->encode,
                  "A UTF-8 text file: each line's ids as a row of int64, padded with -1");
  cmd->add_option("--decode", a->decode, "A .npy of token ids: prints each row's text");
  cmd->add_flag("--no-special-tokens", a->no_special_tokens,
                "--encode without the special tokens the tokenizer frames a sequence with");
  cmd->add_option("--vocab", a->spm.vocab_size, "Vocabulary size")
      ->check(CLI::Range(int64_t{8}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--model-type", a->spm.model_type, "SentencePiece algorithm")
      ->check(CLI::IsMember({"unigram", "bpe", "char", "word"}))
      ->capture_default_str();
  cmd->add_option("--seed", a->spm.seed, "Seed of the line sampling")->capture_default_str();
  cmd->callback([a] { tokenize(*a); });
}

}  // namespace pipetrain::cli
