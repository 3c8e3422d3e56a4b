#include "data/csv.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "ir/error.h"

namespace pipetrain::data {

namespace {

std::string read_all(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw ModelError(path + ": no such file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw ModelError(path + ": cannot open");
  std::string text;
  char buf[1 << 16];
  for (;;) {
    int got = gzread(f, buf, sizeof buf);
    if (got < 0) {
      int errnum = 0;
      std::string msg = gzerror(f, &errnum);
      gzclose(f);
      throw ModelError(path + ": corrupt gzip data (" + msg + ")");
    }
    if (got == 0) break;
    text.append(buf, static_cast<size_t>(got));
  }
  gzclose(f);
  return text;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Splits one line on commas; a field in double quotes may hold commas ("" is a quote).
std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(trim(cur));
  return out;
}

bool parse_number(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

}  // namespace

void labels_from_strings(const std::vector<std::string>& values, const std::string& task,
                         const std::string& what, Dataset& ds) {
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<double> nums(values.size());
  bool all_numbers = true, all_class_ids = true;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!parse_number(values[i], nums[i])) {
      all_numbers = false;
      if (task == "regression")
        throw ModelError(what + ": label '" + values[i] + "' of sample " + std::to_string(i) +
                         " is not a number");
    } else if (!(nums[i] >= 0 && nums[i] == std::floor(nums[i]) && nums[i] < 1e9)) {
      all_class_ids = false;
    }
  }
  if (task == "regression" || (task == "auto" && all_numbers && !all_class_ids)) {
    ds.labels = ir::Tensor(ir::DType::kF32, {n, 1});
    for (int64_t i = 0; i < n; ++i) ds.labels.data<float>()[i] = static_cast<float>(nums[i]);
    ds.num_classes = 0;
    return;
  }
  ds.labels = ir::Tensor(ir::DType::kI64, {n});
  int64_t* out = ds.labels.data<int64_t>();  // (N)
  if (all_numbers) {
    int64_t max_id = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (nums[i] < 0 || nums[i] != std::floor(nums[i]))
        throw ModelError(what + ": label '" + values[i] + "' of sample " + std::to_string(i) +
                         " is not a class id (a non-negative integer)");
      out[i] = static_cast<int64_t>(nums[i]);
      max_id = std::max(max_id, out[i]);
    }
    ds.num_classes = max_id + 1;
    return;
  }
  // Words: ids in sorted order of the distinct words, so the mapping does not depend on row order.
  std::set<std::string> words(values.begin(), values.end());
  std::map<std::string, int64_t> id;
  for (const auto& w : words) id.emplace(w, static_cast<int64_t>(id.size()));
  for (int64_t i = 0; i < n; ++i) out[i] = id.at(values[static_cast<size_t>(i)]);
  ds.num_classes = static_cast<int64_t>(words.size());
}

Dataset read_csv_dataset(const std::string& path, const DataOptions& options) {
  const std::string text = read_all(path);
  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> line_no;
  size_t pos = 0, line = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    ++line;
    std::string l = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (trim(l).empty()) continue;
    rows.push_back(split_fields(l));
    line_no.push_back(line);
  }
  if (rows.empty()) throw ModelError(path + ": empty CSV file");

  // A header is a first row with a field that is not a number.
  std::vector<std::string> header;
  double unused;
  bool has_header = std::any_of(rows[0].begin(), rows[0].end(),
                                [&](const std::string& f) { return !parse_number(f, unused); });
  size_t first = 0;
  if (has_header) {
    header = rows[0];
    first = 1;
  }
  if (rows.size() <= first) throw ModelError(path + ": CSV file has a header but no rows");
  const size_t cols = rows[first].size();
  if (cols < 2) throw ModelError(path + ": CSV needs at least 2 columns (features and a label)");
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r].size() != cols)
      throw ModelError(path + ":" + std::to_string(line_no[r]) + ": " +
                       std::to_string(rows[r].size()) + " columns, expected " +
                       std::to_string(cols));

  // The label column: a header name, an index (negative from the end) or the last.
  int64_t label = static_cast<int64_t>(cols) - 1;
  if (!options.label_column.empty()) {
    auto it = std::find(header.begin(), header.end(), options.label_column);
    double idx;
    if (it != header.end()) {
      label = it - header.begin();
    } else if (parse_number(options.label_column, idx) && idx == std::floor(idx)) {
      label = static_cast<int64_t>(idx);
      if (label < 0) label += static_cast<int64_t>(cols);
      if (label < 0 || label >= static_cast<int64_t>(cols))
        throw ModelError(path + ": label column " + options.label_column + " is out of range (" +
                         std::to_string(cols) + " columns)");
    } else {
      throw ModelError(path + ": no column named '" + options.label_column + "'" +
                       (has_header ? "" : " (the file has no header)"));
    }
  }

  const int64_t n = static_cast<int64_t>(rows.size() - first);
  const int64_t f = static_cast<int64_t>(cols) - 1;
  Dataset ds;
  ds.name = std::filesystem::path(path).filename().string();
  ds.features = ir::Tensor(ir::DType::kF32, {n, f});
  float* x = ds.features.data<float>();  // (N, F)
  std::vector<std::string> label_values;
  label_values.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto& row = rows[first + static_cast<size_t>(i)];
    int64_t j = 0;
    for (int64_t c = 0; c < static_cast<int64_t>(cols); ++c) {
      if (c == label) {
        label_values.push_back(row[static_cast<size_t>(c)]);
        continue;
      }
      double v;
      if (!parse_number(row[static_cast<size_t>(c)], v))
        throw ModelError(path + ":" + std::to_string(line_no[first + static_cast<size_t>(i)]) +
                         ": column " + std::to_string(c + 1) + " ('" + row[static_cast<size_t>(c)] +
                         "') is not a number");
      x[i * f + j++] = static_cast<float>(v);
    }
  }
  labels_from_strings(label_values, options.task, path, ds);
  return ds;
}

}  // namespace pipetrain::data
