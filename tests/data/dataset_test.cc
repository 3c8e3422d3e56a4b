#include "data/dataset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "data/idx.h"
#include "ir/error.h"
#include "tests/data/data_test_util.h"

namespace pipetrain::data {
namespace {

using testing::TempDir;

std::string error_of(const std::string& name, const DataOptions& o = {}) {
  try {
    load_data(name, o);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(Builtin, FashionMnistShapesAndFixedSplit) {
  if (fashion_mnist_dir().empty()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  DataSplit s = load_data("fashion-mnist");
  EXPECT_EQ(s.train.features.shape(), (ir::Shape{60000, 1, 28, 28}));
  EXPECT_EQ(s.test.features.shape(), (ir::Shape{10000, 1, 28, 28}));
  EXPECT_EQ(s.train.labels.shape(), (ir::Shape{60000}));
  EXPECT_EQ(s.train.num_classes, 10);
  EXPECT_EQ(s.train.name, "fashion-mnist/train");
  // First training sample is class 9 (ankle boot); the first test sample too. Pixels in [0, 1].
  EXPECT_EQ(s.train.labels.data<int64_t>()[0], 9);
  EXPECT_EQ(s.test.labels.data<int64_t>()[0], 9);
  const float* x = s.train.features.data<float>();
  float lo = 1, hi = 0;
  for (int64_t i = 0; i < 784 * 100; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
  // 6000 samples of each class in train.
  std::vector<int64_t> counts(10, 0);
  for (int64_t i = 0; i < 60000; ++i) ++counts[s.train.labels.data<int64_t>()[i]];
  EXPECT_EQ(counts, std::vector<int64_t>(10, 6000));
}

TEST(Builtin, DigitsScaledAndStratified) {
  if (digits_csv_path().empty()) GTEST_SKIP() << "python3-sklearn (digits.csv.gz) is not installed";
  DataOptions o;
  o.test_fraction = 0.25;
  o.seed = 3;
  DataSplit s = load_data("digits", o);
  EXPECT_EQ(s.train.size() + s.test.size(), 1797);
  EXPECT_EQ(s.train.features.shape()[1], 64);
  EXPECT_EQ(s.train.num_classes, 10);
  // Stratified: each class's test share is its count * 0.25, rounded.
  std::vector<int64_t> tr(10, 0), te(10, 0);
  for (int64_t i = 0; i < s.train.size(); ++i) ++tr[s.train.labels.data<int64_t>()[i]];
  for (int64_t i = 0; i < s.test.size(); ++i) ++te[s.test.labels.data<int64_t>()[i]];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(te[c], std::llround((tr[c] + te[c]) * 0.25)) << c;
  float hi = 0;
  for (int64_t i = 0; i < s.train.features.numel(); ++i)
    hi = std::max(hi, s.train.features.data<float>()[i]);
  EXPECT_EQ(hi, 1.0f);  // 16 / 16
  // The same seed gives the same split, another seed another one.
  DataSplit again = load_data("digits", o);
  EXPECT_EQ(std::memcmp(again.test.features.raw(), s.test.features.raw(), s.test.features.nbytes()),
            0);
  o.seed = 4;
  DataSplit other = load_data("digits", o);
  EXPECT_NE(std::memcmp(other.test.features.raw(), s.test.features.raw(), s.test.features.nbytes()),
            0);
}

TEST(Synthetic, BlobsRegressionSpiralsAreSeeded) {
  DataOptions o;
  o.synthetic_samples = 200;
  o.synthetic_features = 4;
  o.synthetic_classes = 4;  // 50 per class: 5 of each in test
  o.test_fraction = 0.1;
  DataSplit b = load_data("synthetic:blobs", o);
  EXPECT_EQ(b.train.size(), 180);
  EXPECT_EQ(b.test.size(), 20);
  EXPECT_EQ(b.train.features.shape(), (ir::Shape{180, 4}));
  EXPECT_EQ(b.train.num_classes, 4);
  DataSplit b2 = load_data("synthetic:blobs", o);
  EXPECT_EQ(std::memcmp(b.train.features.raw(), b2.train.features.raw(), b.train.features.nbytes()),
            0);

  DataSplit r = load_data("synthetic:regression", o);
  EXPECT_EQ(r.train.labels.shape(), (ir::Shape{180, 1}));
  EXPECT_EQ(r.train.num_classes, 0);
  DataSplit sp = load_data("synthetic:spirals", o);
  EXPECT_EQ(sp.train.features.shape()[1], 2);
  EXPECT_NE(error_of("synthetic:moons").find("synthetic:moons: unknown synthetic dataset"),
            std::string::npos);
}

TEST(Options, NormalizeUsesTrainStatistics) {
  DataOptions o;
  o.synthetic_samples = 300;
  o.normalize = true;
  DataSplit s = load_data("synthetic:blobs", o);
  const int64_t n = s.train.size(), f = 2;
  for (int64_t j = 0; j < f; ++j) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      double v = s.train.features.data<float>()[i * f + j];
      sum += v, sq += v * v;
    }
    EXPECT_NEAR(sum / n, 0.0, 1e-5);
    EXPECT_NEAR(sq / n, 1.0, 1e-4);
  }
  o.max_samples = 7;
  s = load_data("synthetic:blobs", o);
  EXPECT_EQ(s.train.size(), 7);
  EXPECT_EQ(s.test.size(), 7);
}

TEST(Directory, IdxQuadGivesTheFixedSplit) {
  TempDir dir;
  auto images = [](int64_t n) {
    IdxArray a;
    a.dims = {n, 2, 2};
    for (int64_t i = 0; i < n * 4; ++i) a.bytes.push_back(static_cast<uint8_t>(i));
    return a;
  };
  auto labels = [](std::vector<uint8_t> v) {
    IdxArray a;
    a.dims = {static_cast<int64_t>(v.size())};
    a.bytes = v;
    return a;
  };
  write_idx(dir.file("train-images-idx3-ubyte.gz"), images(3), true);
  write_idx(dir.file("train-labels-idx1-ubyte.gz"), labels({0, 4, 1}), true);
  write_idx(dir.file("t10k-images-idx3-ubyte"), images(2), false);
  write_idx(dir.file("t10k-labels-idx1-ubyte"), labels({2, 2}), false);
  DataSplit s = load_data(dir.path());
  EXPECT_EQ(s.train.features.shape(), (ir::Shape{3, 1, 2, 2}));
  EXPECT_EQ(s.test.features.shape(), (ir::Shape{2, 1, 2, 2}));
  EXPECT_EQ(s.train.num_classes, 5);
  EXPECT_EQ(s.test.num_classes, 5);
  // An images file alone finds its labels sibling; the split is by test_fraction then.
  DataOptions o;
  o.test_fraction = 0;
  EXPECT_EQ(load_data(dir.file("t10k-images-idx3-ubyte"), o).train.size(), 2);

  // A label outside the declared classes, and a count mismatch.
  o.num_classes = 4;
  EXPECT_NE(error_of(dir.path(), o).find("label 4 of sample 1 is out of range [0, 4)"),
            std::string::npos);
  write_idx(dir.file("t10k-labels-idx1-ubyte"), labels({1, 2, 3}), false);
  EXPECT_NE(error_of(dir.path()).find("3 labels for the 2 samples"), std::string::npos);
}

TEST(Errors, UnknownNamesAndOptions) {
  EXPECT_NE(error_of("no-such-dataset")
                .find("no-such-dataset: no such file or directory, and not a "
                      "built-in dataset"),
            std::string::npos);
  TempDir dir;
  EXPECT_NE(error_of(dir.path()).find("no dataset found in this directory"), std::string::npos);
  DataOptions o;
  o.test_fraction = 1.0;
  EXPECT_NE(error_of("synthetic:blobs", o).find("test_fraction must be in [0, 1)"),
            std::string::npos);
  testing::write_text(dir.file("data.bin"), "x");
  EXPECT_NE(error_of(dir.file("data.bin")).find("cannot tell where its labels are"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetrain::data
