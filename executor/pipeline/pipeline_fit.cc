#include "executor/pipeline/pipeline_fit.h"
#include <cmath>

#include <chrono>
#include <cstring>
#include <numeric>

#include "data/batch_loader.h"
#include "ir/error.h"

namespace pipetrain::exec {

ir::Tensor slice_rows(const ir::Tensor& t, int64_t first, int64_t rows) {
  ir::Shape shape = t.shape();
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(shape.at(0));
  shape[0] = rows;
  ir::Tensor out(t.dtype(), shape);
  std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + static_cast<size_t>(first) * row_bytes,
              static_cast<size_t>(rows) * row_bytes);
  return out;
}

void weigh_microbatches(TensorMap* parts, int64_t m, const std::string& labels,
                        const autodiff::TrainingGraph& tg) {
  // c_j: the labels of microbatch j the loss counts; weights m c_j / C average to the
  // minibatch's mean (autodiff::kLossWeight). A step with nothing to count weighs equally.
  std::vector<int64_t> counted(static_cast<size_t>(m), 0);
  int64_t total = 0;
  for (int64_t j = 0; j < m; ++j) {
    const ir::Tensor& y = parts[j].at(labels);
    const int64_t* ids = y.data<int64_t>();
    for (int64_t i = 0, n = y.numel(); i < n; ++i) counted[j] += ids[i] != tg.ignore_index;
    total += counted[j];
  }
  for (int64_t j = 0; j < m; ++j)
    parts[j][tg.loss_weight] = ir::Tensor::scalar_f32(
        total == 0 ? 1.0f
                   : static_cast<float>(static_cast<double>(m * counted[j]) /
                                        static_cast<double>(total)));
}

PipelineFitResult fit_pipeline(Pipeline& pipe, autodiff::TrainingGraph& tg, const ir::Graph& model,
                               Backend& backend, const DataBinding& binding,
                               const data::DataSplit& data, const PipelineFitOptions& options,
                               const PipelineFitCallbacks& callbacks) {
  const int64_t micro = tg.graph.tensor(binding.inputs.at(0)).shape.at(0);
  const int64_t mini = options.minibatch;
  if (mini <= 0 || mini % micro != 0)
    throw ModelError("the minibatch (" + std::to_string(mini) +
                     ") must be a positive multiple of the microbatch (" + std::to_string(micro) +
                     ")");
  const int64_t parts = mini / micro;  // microbatches per step
  const bool async = pipe.options().schedule == partitioner::ScheduleKind::kPipeDream ||
                     pipe.options().schedule == partitioner::ScheduleKind::kTwoBW;
  // Steps per round must split evenly over replicas (pipedream) and be whole steps.
  int64_t granule = 1;
  if (pipe.options().schedule == partitioner::ScheduleKind::kPipeDream)
    for (const auto& st : pipe.stages()) granule = std::lcm(granule, int64_t{st.replicas});

  data::LoaderOptions lo;
  lo.batch_size = mini;
  lo.shuffle = true;
  lo.seed = options.seed;
  lo.drop_last = true;
  const int64_t per_epoch = data.train.size() / mini;  // partial batches are dropped
  if (per_epoch == 0)
    throw ModelError("dataset '" + data.train.name + "' has " + std::to_string(data.train.size()) +
                     " samples, fewer than one minibatch of " + std::to_string(mini));
  lo.first_epoch = options.start_step / per_epoch;
  lo.first_batch = options.start_step % per_epoch;
  data::BatchLoader loader(data.train, lo);

  PipelineFitResult result;
  result.steps = options.start_step;
  const int64_t last_step = options.max_steps > 0
                                ? std::min(options.max_steps, options.epochs * per_epoch)
                                : options.epochs * per_epoch;
  const auto start = std::chrono::steady_clock::now();
  auto next_boundary = [&](int64_t step) {
    auto up = [&](int64_t every) { return every > 0 ? (step / every + 1) * every : INT64_MAX; };
    int64_t end =
        std::min({last_step, (step / per_epoch + 1) * per_epoch, up(options.checkpoint_every),
                  async ? up(options.round_limit) : step + 1});
    return end;
  };

  for (int64_t epoch = lo.first_epoch; epoch < options.epochs && result.steps < last_step;
       ++epoch) {
    EpochReport rep;
    rep.epoch = epoch;
    int64_t steps_in_epoch = 0;
    double epoch_train_s = 0;
    while (result.steps < last_step && result.steps / per_epoch == epoch) {
      // Gather the round's minibatches; a tail that does not split over the
      // replicas is skipped (like a partial batch).
      int64_t round_steps = next_boundary(result.steps) - result.steps;
      round_steps -= round_steps % granule;
      std::vector<data::Batch> batches;
      for (int64_t k = 0; k < round_steps; ++k) {
        auto b = loader.next();
        if (!b) throw RuntimeFault("the data loader ended an epoch early");
        batches.push_back(std::move(*b));
      }
      if (batches.empty()) {  // the epoch's tail: skip to the next epoch
        while (loader.next()) {
        }
        result.steps = (epoch + 1) * per_epoch;
        break;
      }
      std::vector<TensorMap> microbatches;
      for (const auto& b : batches) {
        const size_t first = microbatches.size();
        for (int64_t j = 0; j < parts; ++j) {
          TensorMap feeds;
          for (const auto& [name, t] : batch_feeds(binding, b))
            feeds[name] = slice_rows(t, j * micro, micro);
          microbatches.push_back(std::move(feeds));
        }
        if (!tg.loss_weight.empty())
          weigh_microbatches(microbatches.data() + first, parts, binding.labels, tg);
      }
      RoundResult r = pipe.run(microbatches);
      epoch_train_s += r.seconds;
      result.train_seconds += r.seconds;
      result.samples += static_cast<int64_t>(batches.size()) * mini;
      if (callbacks.on_round) callbacks.on_round(r);
      for (size_t k = 0; k < batches.size(); ++k) {
        StepReport sr;
        sr.step = result.steps++;
        sr.epoch = epoch;
        sr.batch = batches[k].index;
        sr.batches_per_epoch = per_epoch;
        sr.batch_size = mini;
        sr.result.loss = k < r.losses.size() ? r.losses[k] : 0;
        sr.result.grad_norm = k < r.grad_norms.size() ? r.grad_norms[k] : NAN;
        sr.result.lr = pipe.options().lr_schedule.lr_at(sr.step, pipe.options().optimizer.lr);
        sr.seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        rep.train_loss += sr.result.loss;
        ++steps_in_epoch;
        if (callbacks.on_step) callbacks.on_step(sr);
      }
      const bool at_checkpoint =
          options.checkpoint_every > 0 && result.steps % options.checkpoint_every == 0;
      // Every process stops at the same boundary.
      const bool stop = pipe.any_rank(options.stop && options.stop->load());
      if ((at_checkpoint || stop) && callbacks.on_checkpoint) {
        pipe.write_back(tg.graph);
        callbacks.on_checkpoint(result.steps);
      }
      if (stop) {
        result.stopped = true;
        return result;
      }
      if (result.steps % per_epoch == 0) {
        // The loader's end-of-epoch marker.
        if (loader.next()) throw RuntimeFault("the data loader did not end the epoch");
      }
    }
    rep.seconds = epoch_train_s;
    if (steps_in_epoch > 0) rep.train_loss /= static_cast<double>(steps_in_epoch);
    rep.samples_per_s = rep.seconds > 0 ? double(steps_in_epoch * mini) / rep.seconds : 0;
    pipe.write_back(tg.graph);
    if (options.evaluate && pipe.is_root())
      rep.test = evaluate_epoch(tg, model, backend, binding, data.test);
    result.epochs.push_back(rep);
    if (callbacks.on_epoch) callbacks.on_epoch(rep);
  }
  pipe.write_back(tg.graph);
  return result;
}

}  // namespace pipetrain::exec
