// `pipetrain evaluate MODEL --data D`: a model's loss, and its accuracy or perplexity,
// on a split of the data `train` reads. By default the held-out split, cut as train
// cuts it (the same --test-fraction, --seed and --max-samples), so a trained model
// is scored on what its training run held out. Inference mode: BatchNorm on its
// running statistics, no dropout.
#include <fmt/core.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "autodiff/training_graph.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/train_args.h"
#include "cli/train_data.h"
#include "data/dataset.h"
#include "executor/backend.h"
#include "executor/evaluate.h"
#include "importer/importer.h"
#include "ir/error.h"

namespace pipetrain::cli {

namespace {

struct EvaluateArgs {
  TrainArgs t;  // the model and data options train takes
  std::string split = "test";
  bool quiet = false;
};

// One line on stderr, redrawn after each batch.
void draw_progress(int64_t done, int64_t total) {
  constexpr int kWidth = 30;
  const int fill = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
  fmt::print(stderr, "\revaluating [{}{}] {}/{} samples",
             std::string(static_cast<size_t>(fill), '='),
             std::string(static_cast<size_t>(kWidth - fill), ' '), done, total);
  std::fflush(stderr);
}

void evaluate_model(EvaluateArgs& e) {
  TrainArgs& a = e.t;
  a.model.resolve_batch();
  exec::set_cpu_threads(a.threads > 0 ? a.threads : 1);
  ir::Graph model = importer::import_model(a.model.path, a.model.import_options());
  if (model.inputs.empty()) throw ModelError(a.model.path + ": the model has no inputs");
  data::DataSplit split = load_train_data(a, model);
  const autodiff::TrainingGraph tg =
      autodiff::build_training_graph(model, train_loss_spec(a, model, split));
  const exec::DataBinding binding = bind_train_data(a, tg, split);
  const data::Dataset& scored = e.split == "train" ? split.train : split.test;
  if (scored.size() == 0)
    throw ModelError(fmt::format("--split {}: '{}' leaves no samples there (--test-fraction {})",
                                 e.split, a.data, a.test_fraction));
  if (tg.prediction.empty() || binding.labels != tg.labels)
    throw ModelError(a.model.path +
                     ": the model computes its own loss; give --loss (cross-entropy or mse) and "
                     "--loss-output to score one of its outputs");
  exec::EvalSpec spec;
  spec.classification = tg.classes > 0;
  spec.class_axis = tg.class_axis;
  spec.ignore_index = tg.ignore_index;
  auto backend = a.make_backend();
  const exec::EvalResult r =
      exec::evaluate(model, *backend, binding.inputs, tg.prediction, scored, spec,
                     e.quiet ? std::function<void(int64_t, int64_t)>() : draw_progress);
  if (!e.quiet) fmt::print(stderr, "\n");
  std::string scores = fmt::format("loss {:.4f}", r.loss);
  if (split.unigram_loss > 0 && e.split == "test") {
    // A language model on text: perplexity per token, beside the unigram baseline's.
    scores += fmt::format("  perplexity {:.2f} (unigram {:.2f})", std::exp(r.loss),
                          std::exp(split.unigram_loss));
  } else if (split.unigram_loss > 0) {
    scores += fmt::format("  perplexity {:.2f}", std::exp(r.loss));
  } else if (r.has_accuracy) {
    scores += fmt::format("  accuracy {:.2f}%", 100 * r.accuracy);
  }
  fmt::print("{}: {} split of '{}', {} samples ({} labels scored): {}\n", a.model.path, e.split,
             a.data, r.samples, r.scored, scores);
}

}  // namespace

void add_evaluate_command(CLI::App& app) {
  auto e = std::make_shared<EvaluateArgs>();
  TrainArgs& a = e->t;
  CLI::App* cmd = app.add_subcommand(
      "evaluate",
      "Score a model on a dataset: loss, and accuracy or perplexity (by default on the split "
      "train holds out)");
  a.model.add_to(*cmd);
  cmd->add_option("--data", a.data,
                  "Dataset, as train takes it: fashion-mnist, digits, synthetic:..., text:PATH, "
                  "tokens:FILE, csv:FILE, jsonl:FILE, or files")
      ->required();
  cmd->add_option("--split", e->split, "test (the held-out split, cut as train cuts it) or train")
      ->check(CLI::IsMember({"test", "train"}))
      ->capture_default_str();
  cmd->add_option("--labels", a.labels_key, "Named-array datasets: the array holding the labels")
      ->capture_default_str();
  cmd->add_option("--ignore-index", a.ignore_index,
                  "cross-entropy: labels equal to this count for nothing")
      ->capture_default_str();
  add_text_data_options(*cmd, a);
  cmd->add_option("--max-samples", a.max_samples, "Use only the first N samples of each split");
  cmd->add_option("--test-fraction", a.test_fraction,
                  "Held-out share for datasets without a fixed test split (as given to train)")
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "The seed of the split (as given to train)")
      ->capture_default_str();
  cmd->add_option("--loss", a.loss,
                  "Score an output with cross-entropy or mse (default: the model's own loss)");
  cmd->add_option("--loss-output", a.loss_output, "The output the loss reads");
  cmd->add_option("--threads", a.threads, "CPU threads for BLAS and oneDNN (default: 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--backend", a.backend, "cpu, cuda or portable")
      ->check(CLI::IsMember({"cpu", "cuda", "portable"}))
      ->capture_default_str();
  cmd->add_flag("--quiet", e->quiet, "No progress bar");
  cmd->callback([e] { evaluate_model(*e); });
}

}  // namespace pipetrain::cli
