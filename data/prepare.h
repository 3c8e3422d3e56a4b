// The steps every source shares after reading: checks, the train/test split,
// normalisation and truncation.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace pipetrain::data {

/// Checks and canonicalises a freshly read dataset: features become f32 of rank >= 2, labels i64
/// (N) or f32 (N, k); the label count must equal the sample count and class ids must lie in
/// [0, num_classes) (options.num_classes when set, else max + 1). `what` names the source.
void check_dataset(Dataset& ds, const DataOptions& options, const std::string& what);

/// Rows `indices` of a dataset (features and labels), in that order.
Dataset take_rows(const Dataset& ds, const std::vector<int64_t>& indices);

/// A seeded split by test_fraction: stratified (per class) for classification, shuffled for
/// regression. Each side keeps the original sample order.
DataSplit split_dataset(const Dataset& ds, double test_fraction, uint64_t seed);

/// Applies normalize and max_samples, and names the splits "<name>/train" and "<name>/test".
void finish_split(DataSplit& s, const std::string& name, const DataOptions& options);

}  // namespace pipetrain::data
