// Language-model data: text and token streams cut into next-token windows,
// the held-out tail, UTF-8 and empty-corpus errors, nanoGPT's .bin files,
// the unigram baseline; and named-array datasets (a directory of NAME.npy).
#include "data/text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>

#include "data/dataset.h"
#include "data/tokenizer.h"
#include "ir/error.h"
#include "ir/npy.h"
#include "tests/data/data_test_util.h"

namespace pipetrain::data {
namespace {

using testing::TempDir;
using testing::write_text;

std::vector<int64_t> ids_of(const ir::Tensor& t) {
  return t.to_i64();
}

std::vector<int64_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}

std::string error_of(const std::string& name, const DataOptions& o) {
  try {
    load_data(name, o);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(TextData, WindowsOfNextTokensWithAHeldOutTail) {
  TempDir dir;
  write_text(dir.file("a.txt"), "hello world!");  // 12 bytes: 3 windows of 3 + 1 label
  DataOptions o;
  o.seq_len = 3;
  o.test_fraction = 0.25;
  DataSplit s = load_data("text:" + dir.file("a.txt"), o);
  EXPECT_EQ(s.train.features.shape(), (ir::Shape{2, 3}));
  EXPECT_EQ(s.train.labels.shape(), (ir::Shape{2, 3}));
  EXPECT_EQ(ids_of(s.train.features), bytes_of("hello "));
  EXPECT_EQ(ids_of(s.train.labels), bytes_of("ello w"));
  EXPECT_EQ(ids_of(s.test.features), bytes_of("wor"));  // the tail, after the train text
  EXPECT_EQ(ids_of(s.test.labels), bytes_of("orl"));
  EXPECT_EQ(s.train.num_classes, 256);
  EXPECT_GT(s.unigram_loss, 0);
}

TEST(TextData, DirectoryReadsTextFilesInOrder) {
  TempDir dir;
  write_text(dir.file("b"), "cd");
  write_text(dir.file("a.txt"), "ab");
  write_text(dir.file("a.dat"), std::string("\xff\xfe", 2));  // an index, not text: skipped
  write_text(dir.file(".hidden"), "zz");
  EXPECT_EQ(text_files(dir.path()), (std::vector<std::string>{dir.file("a.txt"), dir.file("b")}));
  DataOptions o;
  o.seq_len = 1;
  o.test_fraction = 0;
  DataSplit s = load_data("text:" + dir.path(), o);
  EXPECT_EQ(ids_of(s.train.features), bytes_of("abc"));
  EXPECT_EQ(ids_of(s.train.labels), bytes_of("bcd"));
  EXPECT_EQ(s.test.size(), 0);
}

TEST(TextData, RefusesNonUtf8EmptyAndTooShort) {
  TempDir dir;
  write_text(dir.file("bad.txt"), std::string("ok\xc3(", 4));  // 0xC3 starts a 2-byte form
  write_text(dir.file("empty.txt"), "");
  write_text(dir.file("short.txt"), "abc");
  DataOptions o;
  o.seq_len = 4;
  std::string e = error_of("text:" + dir.file("bad.txt"), o);
  EXPECT_NE(e.find("bad.txt: not UTF-8"), std::string::npos) << e;
  EXPECT_NE(e.find("0xC3 at offset 2"), std::string::npos) << e;
  e = error_of("text:" + dir.file("empty.txt"), o);
  EXPECT_NE(e.find("empty"), std::string::npos) << e;
  e = error_of("text:" + dir.file("short.txt"), o);
  EXPECT_NE(e.find("no training window"), std::string::npos) << e;
  o.seq_len = 0;
  e = error_of("text:" + dir.file("short.txt"), o);
  EXPECT_NE(e.find("--seq-len"), std::string::npos) << e;
  EXPECT_NE(error_of("text:" + dir.file("missing.txt"), o).find("no such file"), std::string::npos);
}

TEST(TextData, Utf8ChecksOverlongAndSurrogates) {
  TempDir dir;
  DataOptions o;
  o.seq_len = 1;
  write_text(dir.file("ok.txt"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");  // é € 😀
  EXPECT_EQ(error_of("text:" + dir.file("ok.txt"), o), "");
  for (const std::string bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    write_text(dir.file("bad.txt"), "x" + bad + "y");
    EXPECT_NE(error_of("text:" + dir.file("bad.txt"), o).find("at offset 1"), std::string::npos);
  }
}

TEST(TokenData, NanoGptBinAndNpyStreams) {
  TempDir dir;
  const std::vector<uint16_t> ids = {1, 2, 3, 4, 5, 6, 7};
  {
    std::ofstream f(dir.file("train.bin"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(14));
  }
  DataOptions o;
  o.seq_len = 2;
  o.test_fraction = 0;
  DataSplit s = load_data("tokens:" + dir.file("train.bin"), o);
  EXPECT_EQ(ids_of(s.train.features), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(ids_of(s.train.labels), (std::vector<int64_t>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(s.train.num_classes, 8);  // max id + 1
  ir::save_npy(ir::Tensor::from_i64({4, 3, 2, 1, 0}, {5}), dir.file("t.npy"));
  s = load_data("tokens:" + dir.file("t.npy"), o);
  EXPECT_EQ(ids_of(s.train.features), (std::vector<int64_t>{4, 3, 2, 1}));
  write_text(dir.file("odd.bin"), "abc");
  EXPECT_NE(error_of("tokens:" + dir.file("odd.bin"), o).find("whole number of uint16"),
            std::string::npos);
  ir::save_npy(ir::Tensor::from_i64({1, 2, 3, 4}, {2, 2}), dir.file("m.npy"));
  EXPECT_NE(error_of("tokens:" + dir.file("m.npy"), o).find("1-D integer"), std::string::npos);
  // Found by npy_fuzzer: an id of 2^40 made the vocabulary (and the unigram
  // baseline's table) 2^40 long.
  ir::save_npy(ir::Tensor::from_i64({1, 2, int64_t{1} << 40, 4}, {4}), dir.file("big.npy"));
  EXPECT_NE(error_of("tokens:" + dir.file("big.npy"), o).find("token 2 has id 1099511627776, beyond"),
            std::string::npos);
}

// Test tokens under the train tokens' add-one unigram frequencies.
TEST(TokenData, UnigramBaseline) {
  DataSplit s;
  s.train.labels = ir::Tensor::from_i64({0, 0, 1}, {1, 3});
  s.test.labels = ir::Tensor::from_i64({0, 1}, {1, 2});
  // counts + 1 over vocab 3: p(0) = 3/6, p(1) = 2/6.
  EXPECT_NEAR(unigram_loss(s, 3), -(std::log(3.0 / 6) + std::log(2.0 / 6)) / 2, 1e-12);
}

TEST(NamedArrays, DirectoryOfInputArraysBesideLabels) {
  TempDir dir;
  ir::save_npy(ir::Tensor::from_i64({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}), dir.file("input_ids.npy"));
  ir::Tensor mask(ir::DType::kBool, {4, 2});
  ir::save_npy(mask, dir.file("attention_mask.npy"));
  ir::save_npy(ir::Tensor::from_i64({0, 1, -100, 1, 1, 0, 0, 1}, {4, 2}), dir.file("labels.npy"));
  DataOptions o;
  o.test_fraction = 0.25;
  DataSplit s = load_data(dir.path(), o);
  EXPECT_FALSE(s.train.features.defined());
  ASSERT_EQ(s.train.inputs.size(), 2u);
  EXPECT_EQ(s.train.inputs.at("input_ids").shape(), (ir::Shape{3, 2}));
  EXPECT_EQ(s.train.inputs.at("attention_mask").dtype(), ir::DType::kBool);
  EXPECT_EQ(s.test.size(), 1);
  EXPECT_EQ(s.train.labels.shape(), (ir::Shape{3, 2}));  // per-position class ids
  EXPECT_EQ(s.train.num_classes, 2);
  // Rows stay together across arrays.
  for (int64_t i = 0; i < s.train.size(); ++i) {
    const int64_t id = s.train.inputs.at("input_ids").data<int64_t>()[i * 2];
    EXPECT_EQ(id % 2, 1);  // rows start 1, 3, 5, 7
  }
  // -100 is PyTorch's ignore index; with another one it is a bad class id.
  o.ignore_index = -1;
  const std::string e = error_of(dir.path(), o);
  EXPECT_NE(e.find("label -100 of sample 1, position 0 is out of range"), std::string::npos) << e;
}

}  // namespace
}  // namespace pipetrain::data
