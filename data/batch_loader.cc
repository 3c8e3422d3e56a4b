#include "data/batch_loader.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "data/random.h"
#include "ir/error.h"

namespace pipetrain::data {

BatchLoader::BatchLoader(const Dataset& dataset, const LoaderOptions& options,
                         BatchTransform transform)
    : dataset_(dataset), options_(options), transform_(std::move(transform)) {
  const std::string what = "batch loader for '" + dataset.name + "'";
  const int64_t n = dataset.size();
  if (n <= 0) throw ModelError(what + ": the dataset is empty");
  if (!dataset.labels.defined() || dataset.labels.rank() == 0 || dataset.labels.shape()[0] != n)
    throw ModelError(what + ": labels do not match the " + std::to_string(n) + " samples");
  if (options.batch_size < 1)
    throw ModelError(what + ": batch_size must be >= 1, got " + std::to_string(options.batch_size));
  if (options.prefetch < 1 || options.prefetch > 16)
    throw ModelError(what + ": prefetch must be in [1, 16], got " +
                     std::to_string(options.prefetch));
  if (options.first_epoch < 0 || options.first_batch < 0)
    throw ModelError(what + ": first_epoch and first_batch must be >= 0");
  batches_per_epoch_ = options.drop_last ? n / options.batch_size
                                         : (n + options.batch_size - 1) / options.batch_size;
  if (batches_per_epoch_ == 0)
    throw ModelError(what + ": drop_last with " + std::to_string(n) + " samples and batch_size " +
                     std::to_string(options.batch_size) + " leaves no batch");
  if (options.first_batch >= batches_per_epoch_)
    throw ModelError(what + ": first_batch " + std::to_string(options.first_batch) +
                     " is past the epoch's " + std::to_string(batches_per_epoch_) + " batches");
  worker_ = std::thread([this] { run(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  not_full_.notify_all();
  try {
    if (worker_.joinable()) worker_.join();
  } catch (...) {
    // join() only throws on a logic error (e.g. a deadlock it detects); never from a destructor.
  }
}

std::vector<int64_t> BatchLoader::epoch_order(int64_t n, const LoaderOptions& options,
                                              int64_t epoch) {
  if (options.shuffle) return permutation(n, options.seed + static_cast<uint64_t>(epoch));
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

Batch BatchLoader::make_batch(const std::vector<int64_t>& order, int64_t epoch,
                              int64_t index) const {
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t begin = index * options_.batch_size;
  const int64_t end = std::min(n, begin + options_.batch_size);
  Batch b;
  b.epoch = epoch;
  b.index = index;
  b.indices.assign(order.begin() + begin, order.begin() + end);
  const int64_t m = end - begin;
  std::vector<std::pair<const ir::Tensor*, ir::Tensor*>> arrays = {{&dataset_.labels, &b.labels}};
  if (dataset_.features.defined()) arrays.emplace_back(&dataset_.features, &b.features);
  for (const auto& [name, t] : dataset_.inputs) arrays.emplace_back(&t, &b.inputs[name]);
  for (auto [src, dst] : arrays) {
    ir::Shape shape = src->shape();
    shape[0] = m;
    *dst = ir::Tensor(src->dtype(), shape);
    const size_t row = src->nbytes() / static_cast<size_t>(src->shape()[0]);
    const auto* from = static_cast<const std::byte*>(src->raw());
    auto* to = static_cast<std::byte*>(dst->raw());
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(to + static_cast<size_t>(i) * row,
                  from + static_cast<size_t>(b.indices[static_cast<size_t>(i)]) * row, row);
  }
  return b;
}

void BatchLoader::run() {
  // Waits for room (or stop) and enqueues; returns false when asked to stop.
  auto push = [this](Item item) {
    std::unique_lock<std::mutex> lock(mu_);
    // Markers do not count against the bound: they hold no data.
    not_full_.wait(lock, [this] {
      return stop_ ||
             static_cast<int>(std::count_if(queue_.begin(), queue_.end(), [](const Item& i) {
               return i.batch.has_value();
             })) < options_.prefetch;
    });
    if (stop_) return false;
    queue_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  };
  try {
    const int64_t n = dataset_.size();
    for (int64_t epoch = options_.first_epoch;; ++epoch) {
      const std::vector<int64_t> order = epoch_order(n, options_, epoch);
      const int64_t first = epoch == options_.first_epoch ? options_.first_batch : 0;
      for (int64_t b = first; b < batches_per_epoch_; ++b) {
        Batch batch = make_batch(order, epoch, b);
        if (transform_) transform_(batch);
        if (!push({std::move(batch), nullptr})) return;
      }
      if (!push({std::nullopt, nullptr})) return;
    }
  } catch (...) {
    push({std::nullopt, std::current_exception()});
  }
}

std::optional<Batch> BatchLoader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
  not_empty_.wait(lock, [this] { return !queue_.empty(); });
  Item item = std::move(queue_.front());
  queue_.pop_front();
  not_full_.notify_one();
  if (item.error) {
    error_ = item.error;
    std::rethrow_exception(error_);
  }
  return std::move(item.batch);
}

}  // namespace pipetrain::data
