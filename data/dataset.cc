// load_data: resolves a name or path to a source, reads it, then checks,
// splits, normalises and truncates (prepare.h).
#include "data/dataset.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "data/csv.h"
#include "data/idx.h"
#include "data/npz.h"
#include "data/prepare.h"
#include "data/synthetic.h"
#include "data/text.h"
#include "data/text_rows.h"
#include "ir/error.h"
#include "ir/npy.h"

namespace pipetrain::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
constexpr const char* kDigitsCsv =
    "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The first file in `dir` whose name starts with one of `prefixes` (sorted order, so the choice
// is stable); empty if none.
std::string find_prefixed(const std::string& dir, const std::vector<std::string>& prefixes) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const auto& p : prefixes)
    for (const auto& n : names)
      if (n.rfind(p, 0) == 0) return (fs::path(dir) / n).string();
  return "";
}

Dataset read_idx_pair(const std::string& images, const std::string& labels) {
  Dataset ds;
  ds.name = fs::path(images).filename().string();
  IdxArray x = read_idx(images);
  ds.features = idx_to_features(x);
  ds.labels = idx_to_labels(read_idx(labels), labels);
  if (ds.labels.shape()[0] != ds.features.shape()[0])
    throw ModelError(labels + ": " + std::to_string(ds.labels.shape()[0]) + " labels for the " +
                     std::to_string(ds.features.shape()[0]) + " samples of " + images);
  return ds;
}

Dataset read_npy_pair(const std::string& x, const std::string& y) {
  if (!fs::is_regular_file(x)) throw ModelError(x + ": no such file");
  if (!fs::is_regular_file(y)) throw ModelError(y + ": no such file (the labels for " + x + ")");
  Dataset ds;
  ds.name = fs::path(x).stem().string();
  ds.features = ir::load_npy(x);
  ds.labels = ir::load_npy(y);
  return ds;
}

// The labels file beside a features file: x->y, X->y, features->labels, images->labels, and
// for IDX idx3->idx1. Empty when the name has none of these.
std::string sibling_labels(const std::string& path) {
  fs::path p(path);
  std::string name = p.filename().string();
  for (auto [from, to] :
       {std::pair{"features", "labels"}, {"images", "labels"}, {"x", "y"}, {"X", "y"}}) {
    std::string f = from;
    size_t k = name.rfind(f);
    // x/X only as a whole word of the stem (x.npy, x_train.npy, train_x.npy).
    if (k == std::string::npos) continue;
    if (f.size() == 1) {
      bool left = k == 0 || name[k - 1] == '_' || name[k - 1] == '-';
      bool right = k + 1 < name.size() && (name[k + 1] == '.' || name[k + 1] == '_');
      if (!left || !right) continue;
    }
    std::string out = name.substr(0, k) + to + name.substr(k + f.size());
    size_t idx3 = out.find("idx3");
    if (idx3 != std::string::npos) out.replace(idx3, 4, "idx1");
    return (p.parent_path() / out).string();
  }
  return "";
}

struct Source {
  DataSplit split;
  bool fixed = false;  // a fixed train/test split; otherwise split.train holds everything
};

Dataset single_array(const ir::Tensor& features, const ir::Tensor& labels) {
  Dataset ds;
  ds.features = features;
  ds.labels = labels;
  return ds;
}

// Arrays keyed by graph input name, the labels under labels_key.
Dataset named_arrays(std::map<std::string, ir::Tensor> arrays, const std::string& labels_key,
                     const std::string& what) {
  Dataset ds;
  ds.name = fs::path(what).filename().string();
  ds.labels = arrays.at(labels_key);
  arrays.erase(labels_key);
  if (arrays.empty())
    throw ModelError(what + ": has labels ('" + labels_key + "') but no input arrays");
  ds.inputs = std::move(arrays);
  return ds;
}

Source read_directory(const std::string& dir, const std::string& labels_key) {
  Source s;
  std::string tr_x = find_prefixed(dir, {"train-images"}),
              tr_y = find_prefixed(dir, {"train-labels"});
  if (!tr_x.empty() && !tr_y.empty()) {
    s.split.train = read_idx_pair(tr_x, tr_y);
    std::string te_x = find_prefixed(dir, {"t10k-images", "test-images"});
    std::string te_y = find_prefixed(dir, {"t10k-labels", "test-labels"});
    if (!te_x.empty() && te_y.empty()) throw ModelError(dir + ": " + te_x + " has no labels file");
    if (!te_x.empty()) {
      s.split.test = read_idx_pair(te_x, te_y);
      s.fixed = true;
    }
    return s;
  }
  for (auto [x, y] :
       {std::pair{"x.npy", "y.npy"}, {"features.npy", "labels.npy"}, {"X.npy", "y.npy"}}) {
    fs::path px = fs::path(dir) / x, py = fs::path(dir) / y;
    if (fs::is_regular_file(px)) {
      s.split.train = read_npy_pair(px.string(), py.string());
      return s;
    }
  }
  const fs::path labels = fs::path(dir) / (labels_key + ".npy");
  if (fs::is_regular_file(labels)) {
    std::map<std::string, ir::Tensor> arrays;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".npy")
        arrays[e.path().stem().string()] = ir::load_npy(e.path().string());
    s.split.train = named_arrays(std::move(arrays), labels_key, dir);
    return s;
  }
  throw ModelError(dir +
                   ": no dataset found in this directory (expected IDX files "
                   "train-images-*/train-labels-* [+ t10k-* or test-*], x.npy + y.npy, "
                   "features.npy + labels.npy, or NAME.npy arrays beside " +
                   labels_key + ".npy)");
}

Source read_npz_source(const std::string& path, const std::string& labels_key) {
  auto arrays = read_npz(path);
  Source s;
  auto has = [&](const char* k) { return arrays.count(k) != 0; };
  if (has("x_train") && has("y_train")) {
    s.split.train = single_array(arrays["x_train"], arrays["y_train"]);
    if (has("x_test") != has("y_test"))
      throw ModelError(path + ": has only one of x_test / y_test");
    if (has("x_test")) {
      s.split.test = single_array(arrays["x_test"], arrays["y_test"]);
      s.fixed = true;
    }
    return s;
  }
  for (auto [x, y] : {std::pair{"x", "y"}, {"features", "labels"}, {"X", "y"}}) {
    if (has(x) && has(y)) {
      s.split.train = single_array(arrays[x], arrays[y]);
      return s;
    }
  }
  if (has(labels_key.c_str())) {
    s.split.train = named_arrays(std::move(arrays), labels_key, path);
    return s;
  }
  std::string keys;
  for (const auto& [k, v] : arrays) keys += (keys.empty() ? "" : ", ") + k;
  throw ModelError(path +
                   ": expected arrays x/y, features/labels, x_train/y_train[/x_test/y_test], or "
                   "arrays named after the model's inputs beside '" +
                   labels_key + "' (--labels), found: " + (keys.empty() ? "none" : keys));
}

Source read_source(const std::string& name, const DataOptions& options) {
  Source s;
  if (name == "fashion-mnist") {
    std::string dir = fashion_mnist_dir();
    if (dir.empty())
      throw ModelError(
          std::string("fashion-mnist: not found in ") + kFashionMnistDir +
          " (install Debian's dataset-fashion-mnist, or set PIPETRAIN_FASHION_MNIST_DIR)");
    s = read_directory(dir, options.labels_key);
    if (!s.fixed) throw ModelError(dir + ": fashion-mnist needs the t10k test files too");
    return s;
  }
  if (name == "digits") {
    std::string path = digits_csv_path();
    if (path.empty())
      throw ModelError(std::string("digits: not found at ") + kDigitsCsv +
                       " (install Debian's python3-sklearn, or set PIPETRAIN_DIGITS_CSV)");
    DataOptions o = options;
    o.label_column = "";
    o.task = "classification";
    s.split.train = read_csv_dataset(path, o);
    // 8x8 images of 4x4-block counts, 0..16: scaled to [0, 1].
    float* x = s.split.train.features.data<float>();
    for (int64_t i = 0; i < s.split.train.features.numel(); ++i) x[i] /= 16.0f;
    return s;
  }
  if (name.rfind("text:", 0) == 0 || name.rfind("tokens:", 0) == 0) {
    TokenWindows w = name[1] == 'e' ? text_windows(name.substr(5), options)
                                    : token_windows(name.substr(7), options);
    s.split = std::move(w.split);
    s.split.unigram_loss = unigram_loss(s.split, w.vocab);
    s.fixed = true;
    return s;
  }
  if (is_text_rows(name)) {
    s.split.train = read_text_rows(name, options);
    return s;
  }
  if (name.rfind("synthetic:", 0) == 0) {
    s.split.train = make_synthetic(name.substr(10), options);
    return s;
  }
  if (size_t comma = name.find(','); comma != std::string::npos) {
    std::string x = name.substr(0, comma), y = name.substr(comma + 1);
    if (ends_with(x, ".npy")) {
      s.split.train = read_npy_pair(x, y);
    } else {
      s.split.train = read_idx_pair(x, y);
    }
    return s;
  }
  if (!fs::exists(name))
    throw ModelError(name +
                     ": no such file or directory, and not a built-in dataset "
                     "(fashion-mnist, digits, synthetic:blobs|regression|spirals)");
  if (fs::is_directory(name)) return read_directory(name, options.labels_key);
  if (ends_with(name, ".npz")) return read_npz_source(name, options.labels_key);
  if (ends_with(name, ".csv") || ends_with(name, ".csv.gz")) {
    s.split.train = read_csv_dataset(name, options);
    return s;
  }
  std::string labels = sibling_labels(name);
  if (labels.empty())
    throw ModelError(name +
                     ": cannot tell where its labels are (name the pair as 'x.npy,y.npy', "
                     "or use x/y, features/labels, images/labels in the file names)");
  if (ends_with(name, ".npy")) {
    s.split.train = read_npy_pair(name, labels);
  } else {
    if (!fs::is_regular_file(labels))
      throw ModelError(labels + ": no such file (the labels for " + name + ")");
    s.split.train = read_idx_pair(name, labels);
  }
  return s;
}

}  // namespace

std::string fashion_mnist_dir() {
  const char* env = std::getenv("PIPETRAIN_FASHION_MNIST_DIR");
  std::string dir = env && *env ? env : kFashionMnistDir;
  return fs::is_directory(dir) ? dir : "";
}

std::string digits_csv_path() {
  const char* env = std::getenv("PIPETRAIN_DIGITS_CSV");
  std::string path = env && *env ? env : kDigitsCsv;
  return fs::is_regular_file(path) ? path : "";
}

DataSplit load_data(const std::string& name_or_path, const DataOptions& options) {
  const std::string& what = name_or_path;
  if (!(options.test_fraction >= 0.0 && options.test_fraction < 1.0))
    throw ModelError(what + ": test_fraction must be in [0, 1), got " +
                     std::to_string(options.test_fraction));
  if (options.task != "auto" && options.task != "classification" && options.task != "regression")
    throw ModelError(what + ": task must be auto, classification or regression, got '" +
                     options.task + "'");
  if (options.max_samples < 0) throw ModelError(what + ": max_samples must be >= 0");
  DataOptions o = options;
  if (name_or_path == "fashion-mnist" || name_or_path == "digits") {
    o.task = "classification";
    if (o.num_classes == 0) o.num_classes = 10;
  }
  Source s = read_source(name_or_path, o);
  check_dataset(s.split.train, o, what);
  if (s.fixed) {
    check_dataset(s.split.test, o, what + " (test split)");
    const ir::Tensor& a = s.split.train.features;
    const ir::Tensor& b = s.split.test.features;
    if (a.defined() && b.defined() &&
        (a.rank() != b.rank() ||
         !std::equal(b.shape().begin() + 1, b.shape().end(), a.shape().begin() + 1)))
      throw ModelError(what + ": train samples " + ir::shape_str(a.shape()) + " and test samples " +
                       ir::shape_str(b.shape()) + " differ in shape");
  } else {
    s.split = split_dataset(s.split.train, o.test_fraction, o.seed);
  }
  finish_split(s.split, name_or_path, o);
  return s.split;
}

}  // namespace pipetrain::data
