// Minibatches of a Dataset, shuffled per epoch with a fixed seed and built on
// a background thread ahead of use.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/dataset.h"

namespace pipetrain::data {

struct LoaderOptions {
  int64_t batch_size = 32;
  /// Epoch e visits the samples in permutation(N, seed + e) (data/random.h); else in order.
  bool shuffle = true;
  uint64_t seed = 0;
  /// Drops the last partial batch of each epoch; otherwise it comes as a smaller batch.
  bool drop_last = false;
  /// Batches built ahead on the worker thread (the queue's bound), 1 to 16.
  int prefetch = 2;
  /// Where to start, e.g. when resuming from a checkpoint.
  int64_t first_epoch = 0;
  int64_t first_batch = 0;
};

/// One minibatch: fresh tensors that the caller owns.
struct Batch {
  ir::Tensor features;                       // (B, ...) as the dataset's features, or undefined
  std::map<std::string, ir::Tensor> inputs;  // named arrays, (B, ...) each
  ir::Tensor labels;                         // (B, ...) i64 or f32
  std::vector<int64_t> indices;              // the samples' rows in the dataset, in batch order
  int64_t epoch = 0;
  int64_t index = 0;  // batch number within the epoch
};

/// Runs on the worker thread on each fresh batch (augmentation, casts); it must be deterministic
/// for the loader to be. Its exceptions reach the consumer through next().
using BatchTransform = std::function<void(Batch&)>;

/// Iterates epochs of batches forever: next() returns the batches of epoch first_epoch, then
/// std::nullopt once at the end of that epoch, then the batches of the next one, and so on.
/// Same dataset, options and seed give the same batches, bitwise. The destructor stops the
/// worker at once (mid-epoch included) and never throws; an exception on the worker is
/// re-thrown by next().
class BatchLoader {
 public:
  /// Throws ModelError on an empty dataset, batch_size < 1, a bad prefetch, or drop_last with
  /// fewer samples than one batch. The dataset's tensors are shared, not copied.
  BatchLoader(const Dataset& dataset, const LoaderOptions& options,
              BatchTransform transform = nullptr);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  std::optional<Batch> next();
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  const LoaderOptions& options() const { return options_; }

  /// The sample order of one epoch (the same the loader uses).
  static std::vector<int64_t> epoch_order(int64_t n, const LoaderOptions& options, int64_t epoch);

 private:
  // A queue item: a batch, or an end-of-epoch marker (no batch), or the worker's exception.
  struct Item {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };
  void run();
  Batch make_batch(const std::vector<int64_t>& order, int64_t epoch, int64_t index) const;

  Dataset dataset_;
  LoaderOptions options_;
  BatchTransform transform_;
  int64_t batches_per_epoch_ = 0;

  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<Item> queue_;  // bounded by options_.prefetch batches (+ markers)
  bool stop_ = false;
  std::exception_ptr error_;  // kept once seen, so every later next() re-throws it
  std::thread worker_;
};

}  // namespace pipetrain::data
