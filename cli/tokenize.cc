// `pipetrain tokenize PATH --vocab N -o tok.model`: trains a SentencePiece
// model on text (a file or a directory of text files) for `train --data
// text:PATH --tokenizer tok.model` and `generate --tokenizer tok.model`.
#include <fmt/core.h>

#include <chrono>

#include "cli/commands.h"
#include "data/sentencepiece.h"
#include "data/tokenizer.h"
#include "ir/error.h"

namespace pipetrain::cli {

namespace {

struct TokenizeArgs {
  std::string path;
  std::string output;
  data::SentencePieceOptions spm;
};

void tokenize(const TokenizeArgs& a) {
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

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Train a SentencePiece tokenizer on text");
  auto a = std::make_shared<TokenizeArgs>();
  cmd->add_option("path", a->path, "A UTF-8 text file or a directory of them")->required();
  cmd->add_option("-o,--output", a->output, "The model to write (NAME.model)")->required();
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
