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
  std::string pair;      // --encode with a second file: each line pair as one sequence
  std::string type_ids;  // --encode: also each row's token types, as a .npy
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

// The file's lines (a final newline ends the last line).
std::vector<std::string> lines_of(const std::string& path) {
  const std::string text = data::read_utf8_file(path);
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

// Rows of equal length, padded with -1.
void save_rows(const std::vector<std::vector<int64_t>>& rows, size_t longest,
               const std::string& path) {
  std::vector<int64_t> flat(rows.size() * longest, -1);
  for (size_t r = 0; r < rows.size(); ++r)
    std::copy(rows[r].begin(), rows[r].end(), flat.begin() + static_cast<int64_t>(r * longest));
  ir::save_npy(ir::Tensor::from_i64(
                   flat, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(longest)}),
               path);
}

// One row of ids per line of the file (with --pair, per pair of lines), padded with
// -1 to the longest; with --type-ids, each id's token type beside them.
void encode_file(const TokenizeArgs& a) {
  const auto tokenizer = data::make_tokenizer(a.tokenizer);
  const std::vector<std::string> lines = lines_of(a.encode);
  if (lines.empty()) throw ModelError(a.encode + ": no lines to encode");
  std::vector<std::string> pairs;
  if (!a.pair.empty()) {
    pairs = lines_of(a.pair);
    if (pairs.size() != lines.size())
      throw ModelError("tokenize --pair: " + a.encode + " has " + std::to_string(lines.size()) +
                       " lines and " + a.pair + " " + std::to_string(pairs.size()) +
                       "; each line pairs with the line of the same number");
  }
  std::vector<std::vector<int64_t>> rows, types;
  size_t longest = 0, total = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    data::FramedPair framed;
    if (!a.pair.empty()) {
      auto first = tokenizer->encode(lines[i]);
      auto second = tokenizer->encode(pairs[i]);
      framed = a.no_special_tokens ? data::concat_pair(std::move(first), second)
                                   : tokenizer->frame_pair(std::move(first), std::move(second));
    } else {
      framed.ids = a.no_special_tokens ? tokenizer->encode(lines[i])
                                       : tokenizer->encode_with_special_tokens(lines[i]);
      framed.type_ids.assign(framed.ids.size(), 0);
    }
    longest = std::max(longest, framed.ids.size());
    total += framed.ids.size();
    rows.push_back(std::move(framed.ids));
    types.push_back(std::move(framed.type_ids));
  }
  save_rows(rows, longest, a.output);
  if (!a.type_ids.empty()) save_rows(types, longest, a.type_ids);
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
  if (a.encode.empty() && (!a.pair.empty() || !a.type_ids.empty()))
    throw ModelError("tokenize: --pair and --type-ids go with --encode FILE");
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
  cmd->add_option("--pair", a->pair,
                  "With --encode: a second file, each line the second text of a sentence pair "
                  "with the --encode line of the same number, framed as the tokenizer frames "
                  "pairs");
  cmd->add_option("--type-ids", a->type_ids,
                  "With --encode: also write each id's token type (the pair's segment) as a .npy "
                  "like -o's");
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
