// `pipetrain generate model.onnx --prompt "..." --tokens N [--top-k K]`:
// text from a trained causal language model, tokenized as it was trained
// (byte-level tokens by default, `--tokenizer` for a tokenizer.json or a SentencePiece .model).
// The model's shapes are static, so each new token is one windowed forward:
// the last T tokens of the text so far (left-aligned; positions past the
// text are padding that a causal model's earlier positions never see) and
// the logits at the last real position.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "data/tokenizer.h"
#include "executor/backend.h"
#include "executor/forward_runner.h"
#include "ir/error.h"

namespace pipetrain::cli {

namespace {

struct GenerateArgs {
  ModelOptions model;
  std::string tokenizer;
  std::string prompt;
  int64_t tokens = 200;
  int64_t top_k = 1;  // 1: greedy
  double temperature = 1.0;
  uint64_t seed = 0;
  int threads = 1;
};

// The next token from logits (V): the argmax, or a draw from the top k at `temperature`.
int64_t pick(const float* logits, int64_t vocab, int64_t top_k, double temperature,
             std::mt19937_64& rng) {
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) order[static_cast<size_t>(i)] = i;
  const auto k = static_cast<size_t>(std::min(top_k, vocab));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                    [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  if (k == 1) return order[0];
  std::vector<double> w(k);
  for (size_t i = 0; i < k; ++i)
    w[i] = std::exp((logits[order[i]] - logits[order[0]]) / temperature);
  std::discrete_distribution<size_t> draw(w.begin(), w.end());
  return order[draw(rng)];
}

void generate(GenerateArgs& a) {
  a.model.batch = 1;
  ir::Graph g = importer::import_model(a.model.path, a.model.import_options());
  if (g.inputs.size() != 1)
    throw ModelError(a.model.path +
                     ": generate runs a language model with one input (token ids), "
                     "this one has " +
                     std::to_string(g.inputs.size()));
  const ir::TensorDesc& in = g.tensor(g.inputs[0]);
  const ir::TensorDesc& out = g.tensor(g.outputs.at(0));
  if (in.dtype != ir::DType::kI64 || in.shape.size() != 2 || out.shape.size() != 3 ||
      out.shape[1] != in.shape[1])
    throw ModelError(a.model.path +
                     ": generate needs token ids i64 (1, T) in and logits (1, T, "
                     "V) out; the model takes " +
                     ir::dtype_name(in.dtype) + " " + ir::shape_str(in.shape) + " and gives " +
                     ir::shape_str(out.shape));
  const auto tokenizer = data::make_tokenizer(a.tokenizer);
  const int64_t window = in.shape[1], vocab = out.shape[2];
  if (vocab < tokenizer->vocab_size())
    throw ModelError(a.model.path + ": its " + std::to_string(vocab) + " logits cannot cover the " +
                     tokenizer->describe() + " tokenizer's " +
                     std::to_string(tokenizer->vocab_size()) + " tokens");
  if (a.prompt.empty()) throw ModelError("--prompt must not be empty");
  if (a.temperature <= 0) throw ModelError("--temperature must be positive");
  std::vector<int64_t> text = tokenizer->encode(a.prompt);
  exec::set_cpu_threads(a.threads);
  auto backend = exec::make_cpu_backend();
  exec::ForwardRunner runner(g, *backend, /*plan_memory=*/true);
  exec::RunOptions opts;
  opts.values_version = exec::fresh_values_version();  // the weights stay put while generating
  std::mt19937_64 rng(a.seed);
  // Printed as the decoded continuation grows: a subword's text can depend on
  // its neighbours (SentencePiece's word-initial spaces), so decode them all.
  std::string shown = tokenizer->decode(text);  // the prompt as the tokenizer sees it
  fmt::print("{}", a.prompt);
  std::fflush(stdout);
  for (int64_t n = 0; n < a.tokens; ++n) {
    const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(text.size()) - window);
    const int64_t len = static_cast<int64_t>(text.size()) - start;
    std::vector<int64_t> ids(static_cast<size_t>(window), 0);
    std::copy(text.begin() + start, text.end(), ids.begin());
    ir::Tensor logits =
        runner.run({{g.inputs[0], ir::Tensor::from_i64(ids, in.shape)}}, opts).at(g.outputs[0]);
    const float* last = logits.data<float>() + (len - 1) * vocab;  // (1, T, V) at T = len - 1
    // Only ids the tokenizer can decode are candidates.
    const int64_t next = pick(last, tokenizer->vocab_size(), a.top_k, a.temperature, rng);
    text.push_back(next);
    const std::string decoded = tokenizer->decode(text);
    if (decoded.compare(0, shown.size(), shown) == 0) {
      fmt::print("{}", decoded.substr(shown.size()));
      shown = decoded;
    }
    std::fflush(stdout);
  }
  // Whatever a late decode changed in text already shown.
  const std::string decoded = tokenizer->decode(text);
  if (decoded.compare(0, shown.size(), shown) == 0) fmt::print("{}", decoded.substr(shown.size()));
  fmt::print("\n");
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("generate", "Continue a prompt with a trained causal language model");
  auto a = std::make_shared<GenerateArgs>();
  cmd->add_option("model", a->model.path, "ONNX model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--prompt", a->prompt, "Text to continue")->required();
  cmd->add_option("--tokenizer", a->tokenizer,
                  "The tokenizer the model was trained with: a tokenizer.json or a "
                  "SentencePiece .model (default: bytes)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tokens", a->tokens, "Tokens to generate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "Sample from the k likeliest tokens (1: greedy)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--temperature", a->temperature, "Softmax temperature for --top-k > 1")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of the sampling")->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads")->check(CLI::PositiveNumber);
  cmd->callback([a] { generate(*a); });
}

}  // namespace pipetrain::cli
