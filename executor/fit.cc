#include "executor/fit.h"

#include <chrono>

#include "data/batch_loader.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

EvalResult evaluate_epoch(const autodiff::TrainingGraph& tg, const ir::Graph& model,
                          Backend& backend, const DataBinding& binding, const data::Dataset& test) {
  if (test.size() == 0 || tg.prediction.empty() || binding.labels != tg.labels) return {};
  EvalSpec spec;
  spec.class_axis = tg.class_axis;
  spec.ignore_index = tg.ignore_index;
  spec.classification = tg.classes > 0;
  return evaluate(model, backend, binding.inputs, tg.prediction, test, spec);
}

std::vector<EpochReport> fit(Trainer& trainer, const autodiff::TrainingGraph& tg,
                             const ir::Graph& model, Backend& backend, const DataBinding& binding,
                             const data::DataSplit& data, const FitOptions& options,
                             const FitCallbacks& callbacks) {
  const int64_t batch = tg.graph.tensor(binding.inputs.at(0)).shape.at(0);
  data::LoaderOptions lo;
  lo.batch_size = batch;
  lo.shuffle = true;
  lo.seed = options.seed;
  lo.drop_last = true;
  data::BatchLoader loader(data.train, lo);

  std::vector<EpochReport> reports;
  const auto start = Clock::now();
  int64_t step = 0;
  for (int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    EpochReport rep;
    rep.epoch = epoch;
    const auto epoch_start = Clock::now();
    int64_t steps_in_epoch = 0;
    while (auto b = loader.next()) {
      if (options.max_steps > 0 && step >= options.max_steps) break;
      StepReport sr;
      sr.result = trainer.step(batch_feeds(binding, *b));
      sr.step = step++;
      sr.epoch = epoch;
      sr.batch = b->index;
      sr.batches_per_epoch = loader.batches_per_epoch();
      sr.batch_size = batch;
      sr.seconds = since(start);
      rep.train_loss += sr.result.loss;
      ++steps_in_epoch;
      if (callbacks.on_step) callbacks.on_step(sr);
    }
    rep.seconds = since(epoch_start);
    if (steps_in_epoch > 0) rep.train_loss /= static_cast<double>(steps_in_epoch);
    rep.samples_per_s = rep.seconds > 0 ? double(steps_in_epoch * batch) / rep.seconds : 0;
    if (options.evaluate) rep.test = evaluate_epoch(tg, model, backend, binding, data.test);
    reports.push_back(rep);
    if (callbacks.on_epoch) callbacks.on_epoch(rep);
    if (options.max_steps > 0 && step >= options.max_steps) break;
  }
  return reports;
}

}  // namespace pipetrain::exec
