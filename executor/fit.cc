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

std::string label_input(const autodiff::TrainingGraph& tg, const std::string& input) {
  if (!tg.labels.empty()) return tg.labels;
  for (const auto& in : tg.graph.inputs)
    if (in != input) return in;
  throw ModelError("the model's loss takes no labels input; cannot feed the dataset's labels");
}

void check_dataset(const autodiff::TrainingGraph& tg, const std::string& input,
                   const data::Dataset& train) {
  const ir::TensorDesc& in = tg.graph.tensor(input);
  const std::string labels = label_input(tg, input);
  const ir::TensorDesc& label_desc = tg.graph.tensor(labels);
  ir::Shape sample(train.features.shape().begin() + 1, train.features.shape().end());
  if (ir::Shape(in.shape.begin() + 1, in.shape.end()) != sample)
    throw ModelError("dataset '" + train.name + "' has samples of shape " + ir::shape_str(sample) +
                     " but input '" + input + "' takes " +
                     ir::shape_str(ir::Shape(in.shape.begin() + 1, in.shape.end())));
  if (train.labels.dtype() != label_desc.dtype)
    throw ModelError("dataset '" + train.name + "' has " + ir::dtype_name(train.labels.dtype()) +
                     " labels but '" + labels + "' takes " + ir::dtype_name(label_desc.dtype) +
                     (label_desc.dtype == ir::DType::kI64
                          ? " class ids (use --loss mse for regression)"
                          : " targets"));
}

std::vector<EpochReport> fit(Trainer& trainer, const autodiff::TrainingGraph& tg,
                             const ir::Graph& model, Backend& backend, const std::string& input,
                             const data::DataSplit& data, const FitOptions& options,
                             const FitCallbacks& callbacks) {
  const ir::TensorDesc& in = tg.graph.tensor(input);
  const std::string labels = label_input(tg, input);
  const ir::TensorDesc& label_desc = tg.graph.tensor(labels);
  const int64_t batch = in.shape.at(0);
  check_dataset(tg, input, data.train);
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
      sr.result =
          trainer.step({{input, b->features}, {labels, b->labels.reshaped(label_desc.shape)}});
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
    if (options.evaluate && data.test.size() > 0 && tg.labels == labels && !tg.prediction.empty())
      rep.test = evaluate(model, backend, input, tg.prediction, data.test);
    reports.push_back(rep);
    if (callbacks.on_epoch) callbacks.on_epoch(rep);
    if (options.max_steps > 0 && step >= options.max_steps) break;
  }
  return reports;
}

}  // namespace pipetrain::exec
