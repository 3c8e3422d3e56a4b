#include "data/idx.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "ir/error.h"
#include "tests/data/data_test_util.h"

namespace pipetrain::data {
namespace {

using testing::TempDir;

IdxArray tiny_images() {
  IdxArray a;
  a.type = IdxType::kU8;
  a.dims = {2, 2, 3};  // (N, H, W)
  a.bytes = {0, 51, 255, 1, 2, 3, 10, 20, 30, 40, 50, 60};
  return a;
}

TEST(Idx, RoundTripPlainAndGzip) {
  TempDir dir;
  for (bool gz : {false, true}) {
    const std::string path = dir.file(gz ? "a.idx.gz" : "a.idx");
    write_idx(path, tiny_images(), gz);
    IdxArray b = read_idx(path);
    EXPECT_EQ(b.type, IdxType::kU8);
    EXPECT_EQ(b.dims, (std::vector<int64_t>{2, 2, 3}));
    EXPECT_EQ(b.bytes, tiny_images().bytes);
  }
  // The plain file is exactly header + data: magic 00 00 08 03, three big-endian dims.
  std::ifstream f(dir.file("a.idx"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), 4u + 12u + 12u);
  EXPECT_EQ(std::string(bytes.data(), 8), std::string("\0\0\x08\x03\0\0\0\x02", 8));
}

TEST(Idx, WideTypesAreBigEndianOnDisk) {
  TempDir dir;
  IdxArray a;
  a.type = IdxType::kI32;
  a.dims = {2};
  a.bytes.resize(8);
  int32_t v[2] = {258, -1};
  std::memcpy(a.bytes.data(), v, 8);
  write_idx(dir.file("l.idx"), a, false);
  std::ifstream f(dir.file("l.idx"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.substr(8, 4), std::string("\0\0\x01\x02", 4));
  IdxArray b = read_idx(dir.file("l.idx"));
  EXPECT_EQ(b.at(0), 258.0);
  EXPECT_EQ(b.at(1), -1.0);
}

TEST(Idx, FeaturesScaleBytesAndGainAChannel) {
  ir::Tensor x = idx_to_features(tiny_images());
  EXPECT_EQ(x.shape(), (ir::Shape{2, 1, 2, 3}));
  EXPECT_FLOAT_EQ(x.data<float>()[1], 0.2f);  // 51 / 255
  EXPECT_FLOAT_EQ(x.data<float>()[2], 1.0f);
  IdxArray l;
  l.type = IdxType::kU8;
  l.dims = {3};
  l.bytes = {9, 0, 4};
  ir::Tensor y = idx_to_labels(l, "labels");
  EXPECT_EQ(y.dtype(), ir::DType::kI64);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{9, 0, 4}));
  EXPECT_THROW(idx_to_labels(tiny_images(), "images"), ModelError);
}

std::string error_of(const std::string& path) {
  try {
    read_idx(path);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(Idx, BadFilesNameTheFileAndTheProblem) {
  TempDir dir;
  EXPECT_NE(error_of(dir.file("missing.idx")).find("missing.idx: no such file"), std::string::npos);

  testing::write_text(dir.file("magic.idx"), std::string("\x01\x00\x08\x01\0\0\0\x01\x05", 9));
  EXPECT_NE(error_of(dir.file("magic.idx")).find("magic.idx: bad IDX magic number 0x01000801"),
            std::string::npos);
  testing::write_text(dir.file("type.idx"), std::string("\0\0\x07\x01\0\0\0\x01\x05", 9));
  EXPECT_NE(error_of(dir.file("type.idx")).find("bad IDX magic"), std::string::npos);

  testing::write_text(dir.file("short.idx"), std::string("\0\0\x08", 3));
  EXPECT_NE(error_of(dir.file("short.idx")).find("short.idx: truncated IDX header"),
            std::string::npos);

  // Header says 5 bytes of data, 3 follow.
  testing::write_text(dir.file("trunc.idx"), std::string("\0\0\x08\x01\0\0\0\x05\x01\x02\x03", 11));
  EXPECT_NE(error_of(dir.file("trunc.idx")).find("trunc.idx: truncated IDX data: 3 of 5 bytes"),
            std::string::npos);
  // Found by idx_fuzzer: 2^32 - 1 i32 values claimed, 4 bytes there; the
  // reader stops at the data's end instead of allocating 16 GiB first.
  testing::write_text(dir.file("huge.idx"),
                      std::string("\0\0\x0C\x01\xFF\xFF\xFF\xFF\x01\x02\x03\x04", 12));
  EXPECT_NE(error_of(dir.file("huge.idx")).find("truncated IDX data: 4 of 17179869180 bytes"),
            std::string::npos)
      << error_of(dir.file("huge.idx"));
  testing::write_text(dir.file("extra.idx"), std::string("\0\0\x08\x01\0\0\0\x01\x01\x02", 10));
  EXPECT_NE(error_of(dir.file("extra.idx")).find("extra.idx: trailing bytes"), std::string::npos);

  // A gzip stream cut in half: zlib reports it, or the data comes up short.
  write_idx(dir.file("cut.idx.gz"), tiny_images(), true);
  std::filesystem::resize_file(dir.file("cut.idx.gz"), 20);
  std::string cut = error_of(dir.file("cut.idx.gz"));
  EXPECT_EQ(cut.rfind(dir.file("cut.idx.gz") + ": ", 0), 0u) << cut;
  EXPECT_TRUE(cut.find("truncated") != std::string::npos ||
              cut.find("corrupt") != std::string::npos)
      << cut;
}

}  // namespace
}  // namespace pipetrain::data
