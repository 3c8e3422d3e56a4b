#include "data/csv.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <zlib.h>

#include "data/dataset.h"
#include "ir/error.h"
#include "tests/data/data_test_util.h"

namespace pipetrain::data {
namespace {

using testing::TempDir;
using testing::write_text;

TEST(Csv, HeaderNamedLabelColumnAndWordClasses) {
  TempDir dir;
  write_text(dir.file("iris.csv"),
             "a, species ,b\n"
             "1.5,virginica,2\n"
             "\n"
             "-3,setosa,4e-1\r\n"
             "0,virginica,0\n");
  DataOptions o;
  o.label_column = "species";
  Dataset ds = read_csv_dataset(dir.file("iris.csv"), o);
  EXPECT_EQ(ds.features.shape(), (ir::Shape{3, 2}));
  const float* x = ds.features.data<float>();
  EXPECT_EQ(std::vector<float>(x, x + 6), (std::vector<float>{1.5f, 2, -3, 0.4f, 0, 0}));
  // Words become ids in sorted order: setosa 0, virginica 1.
  EXPECT_EQ(ds.labels.to_i64(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(ds.num_classes, 2);
}

TEST(Csv, NoHeaderLastColumnIntegersAreClasses) {
  TempDir dir;
  write_text(dir.file("d.csv"), "1,2,3\n4,5,0\n");
  Dataset ds = read_csv_dataset(dir.file("d.csv"), {});
  EXPECT_EQ(ds.features.shape(), (ir::Shape{2, 2}));
  EXPECT_EQ(ds.labels.dtype(), ir::DType::kI64);
  EXPECT_EQ(ds.labels.to_i64(), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(ds.num_classes, 4);
  // Index 0 and a negative index pick other columns.
  DataOptions o;
  o.label_column = "-3";
  ds = read_csv_dataset(dir.file("d.csv"), o);
  EXPECT_EQ(ds.labels.to_i64(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(ds.features.data<float>()[0], 2.0f);
}

// Found by csv_fuzzer: the split kept a group per class id up to the largest,
// so one label of 145204520 made 145 million empty groups (3.5 GB, minutes).
TEST(Csv, AHugeClassIdSplitsByTheClassesPresent) {
  TempDir dir;
  write_text(dir.file("big.csv"), "0.5,10,145204520\n1.5,20,3\n2.5,30,3\n3.5,40,145204520\n");
  DataSplit s = load_data(dir.file("big.csv"), {});
  EXPECT_EQ(s.train.num_classes, 145204521);
  EXPECT_EQ(s.train.size() + s.test.size(), 4);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  EXPECT_LT(usage.ru_maxrss, 512 * 1024) << "KiB at peak";
}

TEST(Csv, FractionalLabelsAreRegressionTargets) {
  TempDir dir;
  write_text(dir.file("r.csv"), "x,y\n1,0.5\n2,-1.25\n");
  Dataset ds = read_csv_dataset(dir.file("r.csv"), {});
  EXPECT_EQ(ds.labels.dtype(), ir::DType::kF32);
  EXPECT_EQ(ds.labels.shape(), (ir::Shape{2, 1}));
  EXPECT_EQ(ds.labels.data<float>()[1], -1.25f);
  EXPECT_EQ(ds.num_classes, 0);
  DataOptions o;
  o.task = "regression";
  write_text(dir.file("i.csv"), "1,2\n3,4\n");
  EXPECT_EQ(read_csv_dataset(dir.file("i.csv"), o).labels.dtype(), ir::DType::kF32);
}

TEST(Csv, GzippedQuotedFields) {
  TempDir dir;
  const std::string text = "\"f,1\",label\n\"7\",\"2\"\n";
  gzFile f = gzopen(dir.file("q.csv.gz").c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  Dataset ds = read_csv_dataset(dir.file("q.csv.gz"), {});
  EXPECT_EQ(ds.features.data<float>()[0], 7.0f);
  EXPECT_EQ(ds.labels.to_i64(), (std::vector<int64_t>{2}));
}

std::string error_of(const std::string& path, const DataOptions& o = {}) {
  try {
    read_csv_dataset(path, o);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(Csv, BadFilesNameTheFileLineAndProblem) {
  TempDir dir;
  EXPECT_NE(error_of(dir.file("none.csv")).find("none.csv: no such file"), std::string::npos);
  write_text(dir.file("empty.csv"), "\n\n");
  EXPECT_NE(error_of(dir.file("empty.csv")).find("empty.csv: empty CSV"), std::string::npos);
  write_text(dir.file("ragged.csv"), "1,2,3\n4,5\n");
  EXPECT_NE(error_of(dir.file("ragged.csv")).find("ragged.csv:2: 2 columns, expected 3"),
            std::string::npos);
  write_text(dir.file("word.csv"), "a,b\n1,2\nx,3\n");
  EXPECT_NE(error_of(dir.file("word.csv")).find("word.csv:3: column 1 ('x') is not a number"),
            std::string::npos);
  DataOptions o;
  o.label_column = "nope";
  EXPECT_NE(error_of(dir.file("word.csv"), o).find("no column named 'nope'"), std::string::npos);
  o.label_column = "5";
  EXPECT_NE(error_of(dir.file("word.csv"), o).find("label column 5 is out of range"),
            std::string::npos);
  write_text(dir.file("neg.csv"), "1,2\n3,-1\n");
  o = {};
  o.task = "classification";
  EXPECT_NE(error_of(dir.file("neg.csv"), o).find("label '-1' of sample 1 is not a class id"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetrain::data
