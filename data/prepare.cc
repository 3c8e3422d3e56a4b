#include "data/prepare.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>

#include "data/random.h"
#include "ir/error.h"

namespace pipetrain::data {

namespace {

// Arrays keep one of three element types: f32 (any float), i64 (any integer:
// token ids, class ids) or bool (masks).
ir::Tensor canonical(const ir::Tensor& t) {
  if (t.dtype() == ir::DType::kF32 || t.dtype() == ir::DType::kI64 || t.dtype() == ir::DType::kBool)
    return t;
  const bool to_float = ir::is_float(t.dtype());
  ir::Tensor out(to_float ? ir::DType::kF32 : ir::DType::kI64, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (to_float)
      out.data<float>()[i] = static_cast<float>(t.at(i));
    else
      out.data<int64_t>()[i] = static_cast<int64_t>(t.at(i));
  }
  return out;
}

ir::Tensor to_f32(const ir::Tensor& t) {
  if (t.dtype() == ir::DType::kF32) return t;
  ir::Tensor out(ir::DType::kF32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out.data<float>()[i] = static_cast<float>(t.at(i));
  return out;
}

int64_t row_elems(const ir::Tensor& t) {
  return t.shape()[0] == 0 ? 0 : t.numel() / t.shape()[0];
}

// Every array of the dataset with the name errors use for it.
std::vector<std::pair<std::string, ir::Tensor*>> arrays_of(Dataset& ds) {
  std::vector<std::pair<std::string, ir::Tensor*>> out;
  if (ds.features.defined()) out.emplace_back("features", &ds.features);
  for (auto& [name, t] : ds.inputs) out.emplace_back("array '" + name + "'", &t);
  return out;
}

// A NaN or infinity in the inputs would surface steps later as "the loss is
// nan"; found here, it names the sample.
void check_finite(const ir::Tensor& t, const std::string& what) {
  if (t.dtype() != ir::DType::kF32 || t.numel() == 0) return;
  const float* x = t.data<float>();
  const int64_t per = t.numel() / t.shape()[0];
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (std::isfinite(x[i])) continue;
    throw ModelError(what + ": " + (std::isnan(x[i]) ? "NaN" : "infinity") + " in sample " +
                     std::to_string(i / per) +
                     (per > 1 ? " (element " + std::to_string(i % per) + ")" : std::string()) +
                     "; clean the data or drop the sample");
  }
}

}  // namespace

void check_dataset(Dataset& ds, const DataOptions& options, const std::string& what) {
  if (!ds.features.defined() && ds.inputs.empty())
    throw ModelError(what + ": the dataset has no input arrays");
  if (ds.features.defined() && ds.features.rank() == 0)
    throw ModelError(what + ": features must have a sample dimension, got a scalar");
  if (!ds.labels.defined() || ds.labels.rank() == 0)
    throw ModelError(what + ": labels must have a sample dimension, got a scalar");
  const int64_t n = ds.size();
  for (auto& [name, t] : arrays_of(ds)) {
    if (t->rank() == 0 || t->shape()[0] != n)
      throw ModelError(what + ": " + name + " has shape " + ir::shape_str(t->shape()) +
                       " but the dataset has " + std::to_string(n) + " samples");
    *t = canonical(*t);
    check_finite(*t, what + ": " + name);
  }
  if (ds.labels.shape()[0] != n)
    throw ModelError(what + ": " + std::to_string(ds.labels.shape()[0]) + " labels for " +
                     std::to_string(n) + " samples");
  // A single float array is a feature matrix: (N) means one feature each.
  if (ds.features.defined() && ds.features.rank() == 1 && ds.features.dtype() == ir::DType::kF32)
    ds.features = ds.features.reshaped({n, 1});

  const ir::DType lt = ds.labels.dtype();
  const bool integer_labels =
      lt == ir::DType::kI64 || lt == ir::DType::kI32 || lt == ir::DType::kBool;
  bool classes = options.task == "classification" || (options.task == "auto" && integer_labels);
  if (options.task == "regression") classes = false;
  if (!classes) {
    ds.labels = to_f32(ds.labels);
    if (ds.labels.rank() == 1) ds.labels = ds.labels.reshaped({n, 1});
    ds.num_classes = 0;
    return;
  }
  // Class ids: one per sample (N), or one per position (N, T...) for per-token losses.
  ir::Tensor ids(ir::DType::kI64, ds.labels.shape());
  const int64_t per_sample = row_elems(ds.labels);
  int64_t max_id = -1;
  for (int64_t i = 0; i < ds.labels.numel(); ++i) {
    double v = ds.labels.at(i);
    const std::string where = per_sample == 1 ? "sample " + std::to_string(i)
                                              : "sample " + std::to_string(i / per_sample) +
                                                    ", position " + std::to_string(i % per_sample);
    if (v != std::floor(v))
      throw ModelError(what + ": label " + std::to_string(v) + " of " + where +
                       " is not an integer class id");
    int64_t id = static_cast<int64_t>(v);
    if (id == options.ignore_index) {
      ids.data<int64_t>()[i] = id;
      continue;
    }
    if (id < 0 || (options.num_classes > 0 && id >= options.num_classes))
      throw ModelError(
          what + ": label " + std::to_string(id) + " of " + where + " is out of range [0, " +
          (options.num_classes > 0 ? std::to_string(options.num_classes) : "inf") + ")" +
          (id < 0 ? " (ids equal to the ignore index " + std::to_string(options.ignore_index) +
                        " are skipped)"
                  : ""));
    ids.data<int64_t>()[i] = id;
    max_id = std::max(max_id, id);
  }
  ds.labels = ids;
  ds.num_classes =
      options.num_classes > 0 ? options.num_classes : std::max(ds.num_classes, max_id + 1);
}

Dataset take_rows(const Dataset& ds, const std::vector<int64_t>& indices) {
  Dataset out;
  out.name = ds.name;
  out.num_classes = ds.num_classes;
  const int64_t m = static_cast<int64_t>(indices.size());
  out.source_rows.resize(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) out.source_rows[i] = ds.source_row(indices[i]);
  std::vector<std::pair<const ir::Tensor*, ir::Tensor*>> arrays = {{&ds.labels, &out.labels}};
  if (ds.features.defined()) arrays.emplace_back(&ds.features, &out.features);
  for (const auto& [name, t] : ds.inputs) arrays.emplace_back(&t, &out.inputs[name]);
  for (auto [src, dst] : arrays) {
    ir::Shape shape = src->shape();
    shape[0] = m;
    *dst = ir::Tensor(src->dtype(), shape);
    const size_t row = static_cast<size_t>(row_elems(*src)) * ir::dtype_size(src->dtype());
    const auto* from = static_cast<const std::byte*>(src->raw());
    auto* to = static_cast<std::byte*>(dst->raw());
    for (int64_t i = 0; i < m; ++i) {
      assert(indices[i] >= 0 && indices[i] < src->shape()[0]);
      std::memcpy(to + static_cast<size_t>(i) * row, from + static_cast<size_t>(indices[i]) * row,
                  row);
    }
  }
  return out;
}

DataSplit split_dataset(const Dataset& ds, double test_fraction, uint64_t seed) {
  const int64_t n = ds.size();
  std::mt19937_64 rng(seed);
  std::vector<int64_t> train, test;
  // Groups: one per class (stratified) when each sample has one class id; else one group.
  bool stratify = ds.is_classification() && ds.labels.rank() == 1;
  for (int64_t i = 0; stratify && i < n; ++i) stratify = ds.labels.data<int64_t>()[i] >= 0;
  // Keyed by class id, in id order: memory follows the classes present, not
  // the largest id (a CSV's label 145204520 made 145 million empty groups).
  std::map<int64_t, std::vector<int64_t>> groups;
  for (int64_t i = 0; i < n; ++i) groups[stratify ? ds.labels.data<int64_t>()[i] : 0].push_back(i);
  for (auto& group : groups) {
    std::vector<int64_t>& g = group.second;
    fisher_yates(g, rng);
    const size_t n_test =
        static_cast<size_t>(std::llround(static_cast<double>(g.size()) * test_fraction));
    test.insert(test.end(), g.begin(), g.begin() + static_cast<std::ptrdiff_t>(n_test));
    train.insert(train.end(), g.begin() + static_cast<std::ptrdiff_t>(n_test), g.end());
  }
  std::sort(train.begin(), train.end());
  std::sort(test.begin(), test.end());
  return {take_rows(ds, train), take_rows(ds, test)};
}

void finish_split(DataSplit& s, const std::string& name, const DataOptions& options) {
  if (options.max_samples > 0) {
    for (Dataset* d : {&s.train, &s.test}) {
      if (d->size() <= options.max_samples) continue;
      std::vector<int64_t> first(static_cast<size_t>(options.max_samples));
      std::iota(first.begin(), first.end(), 0);
      *d = take_rows(*d, first);
    }
  }
  s.train.num_classes = s.test.num_classes = std::max(s.train.num_classes, s.test.num_classes);
  if (options.normalize && s.train.size() > 0 && s.train.features.defined() &&
      s.train.features.dtype() == ir::DType::kF32) {
    // Per feature f over the train rows: mean = sum x / N, std = sqrt(sum (x - mean)^2 / N),
    // in double and in row order; a constant feature keeps std 1 (it becomes 0 everywhere).
    const int64_t n = s.train.size(), f = row_elems(s.train.features);
    std::vector<double> mean(static_cast<size_t>(f), 0.0), var(static_cast<size_t>(f), 0.0);
    const float* x = s.train.features.data<float>();  // (N, F...)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < f; ++j) mean[j] += x[i * f + j];
    for (auto& m : mean) m /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < f; ++j) var[j] += (x[i * f + j] - mean[j]) * (x[i * f + j] - mean[j]);
    std::vector<double> sd(static_cast<size_t>(f));
    for (int64_t j = 0; j < f; ++j) {
      sd[j] = std::sqrt(var[j] / static_cast<double>(n));
      if (!(sd[j] > 0)) sd[j] = 1.0;
    }
    for (Dataset* d : {&s.train, &s.test}) {
      d->features = d->features.clone();  // never write through a buffer a caller may share
      float* y = d->features.data<float>();
      for (int64_t i = 0; i < d->size(); ++i)
        for (int64_t j = 0; j < f; ++j)
          y[i * f + j] = static_cast<float>((y[i * f + j] - mean[j]) / sd[j]);
    }
  }
  s.train.name = name + "/train";
  s.test.name = name + "/test";
}

}  // namespace pipetrain::data
