// CSV datasets: one sample per row, comma-separated, an optional header, one
// label column. Plain or gzipped (zlib detects which).
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace pipetrain::data {

/// Turns label strings into labels: with task "auto", non-negative integers become i64 class
/// ids, other numbers (N, 1) f32 targets and words class ids in sorted order of the distinct
/// words; "classification" and "regression" force one kind. `what` names the source in errors.
/// Sets ds.labels and ds.num_classes (max id + 1; 0 for regression).
void labels_from_strings(const std::vector<std::string>& values, const std::string& task,
                         const std::string& what, Dataset& ds);

/// Reads a CSV file into features (N, F) f32 and labels. The header is present when any field of
/// the first row is not a number; label_column is a header name or an index (negative from the
/// end), empty for the last column.
Dataset read_csv_dataset(const std::string& path, const DataOptions& options);

}  // namespace pipetrain::data
