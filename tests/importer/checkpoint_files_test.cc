// Checkpoints on disk: the CRC-32 finds a flipped bit and a truncated file,
// rotation keeps the newest K with the checkpoint path naming the newest, the
// background writer reports a failed write, and the newest checkpoint that
// verifies is found past damaged ones.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "importer/checkpoint.h"
#include "importer/checkpoint_files.h"
#include "ir/error.h"

namespace pipetrain::importer {
namespace {

namespace fs = std::filesystem;

class CheckpointFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pipetrain-ck-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A checkpoint whose weights and "step" are `step`.
  static Checkpoint at_step(int64_t step) {
    Checkpoint c;
    c.values["fc.weight"] = ir::Tensor::from_f32(std::vector<float>(64, float(step)), {8, 8});
    c.roles["fc.weight"] = ir::Role::kParam;
    c.values["fc.weight.momentum"] = ir::Tensor::from_f32({1, 2, 3}, {3});
    c.roles["fc.weight.momentum"] = ir::Role::kOptimizerState;
    c.meta["step"] = std::to_string(step);
    return c;
  }
  static void flip_bit_at(const std::string& path, size_t at) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0x04);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&b, 1);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(CheckpointFilesTest, RoundTripsAndRefusesAFlippedBitOrATruncatedFile) {
  const std::string p = path("ck.onnx");
  write_checkpoint(at_step(7), p);
  const Checkpoint c = load_checkpoint(p);
  EXPECT_EQ(c.meta.at("step"), "7");
  EXPECT_EQ(c.meta.size(), 1u);  // the checksum and roles are the file's business
  EXPECT_EQ(c.values.at("fc.weight").data<float>()[63], 7.0f);
  EXPECT_EQ(c.roles.at("fc.weight.momentum"), ir::Role::kOptimizerState);

  // A bit flipped inside the weights' bytes still parses; the checksum refuses it.
  const size_t size = fs::file_size(p);
  std::ifstream in(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string seven("\x00\x00\xe0\x40\x00\x00\xe0\x40", 8);  // 7.0f, 7.0f
  const size_t weights = bytes.find(seven);
  ASSERT_NE(weights, std::string::npos);
  flip_bit_at(p, weights + 2);
  try {
    load_checkpoint(p);
    FAIL() << "a flipped bit was not found";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  write_checkpoint(at_step(7), p);
  fs::resize_file(p, size / 2);
  EXPECT_THROW(load_checkpoint(p), ModelError);
}

TEST_F(CheckpointFilesTest, RotationKeepsTheNewestAndThePathNamesTheNewest) {
  const std::string p = path("ck.onnx");
  CheckpointWriter w(p, 3);
  for (int64_t step : {10, 20, 30, 40, 50}) w.submit(at_step(step), step);
  w.finish();
  EXPECT_EQ(w.written(), 5);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"ck.onnx", "ck.step30.onnx", "ck.step40.onnx",
                                             "ck.step50.onnx"}));
  EXPECT_EQ(load_checkpoint(p).meta.at("step"), "50");
  EXPECT_EQ(rotated_checkpoint_path(p, 30), path("ck.step30.onnx"));
}

TEST_F(CheckpointFilesTest, LatestSkipsDamagedFilesNamingThem) {
  const std::string p = path("ck.onnx");
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& w) { warnings.push_back(w); };
  EXPECT_FALSE(latest_checkpoint(p, warn).has_value());  // nothing yet: a fresh start

  {
    CheckpointWriter w(p, 3);
    for (int64_t step : {10, 20, 30}) w.submit(at_step(step), step);
    w.finish();
  }
  auto found = latest_checkpoint(p, warn);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->checkpoint.meta.at("step"), "30");
  EXPECT_TRUE(warnings.empty());

  // The newest damaged (both its names: one file), and step 20 truncated: step 10 it is.
  fs::resize_file(p, fs::file_size(p) - 9);
  fs::resize_file(path("ck.step20.onnx"), 100);
  found = latest_checkpoint(p, warn);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, path("ck.step10.onnx"));
  EXPECT_EQ(found->checkpoint.meta.at("step"), "10");
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_NE(warnings[0].find(p), std::string::npos);
  EXPECT_NE(warnings[2].find("ck.step20.onnx"), std::string::npos);

  // A write that stopped between the two names: the rotated file is newer than the path.
  write_checkpoint(at_step(40), path("ck.step40.onnx"));
  write_checkpoint(at_step(30), p);
  warnings.clear();
  EXPECT_EQ(latest_checkpoint(p, warn)->checkpoint.meta.at("step"), "40");

  fs::resize_file(path("ck.step10.onnx"), 10);
  fs::resize_file(path("ck.step40.onnx"), 10);
  fs::resize_file(p, 10);
  EXPECT_THROW(latest_checkpoint(p, warn), ModelError);
}

TEST_F(CheckpointFilesTest, ABackgroundWriteThatFailsIsReported) {
  CheckpointWriter w(path("no/such/dir/ck.onnx"), 1);
  w.submit(at_step(1), 1);
  EXPECT_THROW(w.finish(), ModelError);
  // The writer goes on: the next write to a good place is not blamed for the old one.
  CheckpointWriter ok(path("ck.onnx"), 1);
  ok.submit(at_step(2), 2);
  EXPECT_NO_THROW(ok.finish());
  EXPECT_EQ(ok.written(), 1);
}

}  // namespace
}  // namespace pipetrain::importer
