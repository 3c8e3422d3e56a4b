#include "data/npz.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>

#include "data/dataset.h"
#include "ir/error.h"
#include "ir/npy.h"
#include "tests/data/data_test_util.h"

namespace pipetrain::data {
namespace {

using testing::TempDir;

// Archives written by numpy 1.24 (/usr/bin/python3):
//   x = np.array([[1.5, -2.0, 3.25], [0.0, 4.0, -1.0]], dtype=np.float32)
//   y = np.array([2, 0], dtype=np.int64)
//   np.savez(f, x=x, y=y)             -> kStoredHex (zip64 entries, stored)
//   np.savez_compressed(f, x=x, y=y)  -> kDeflatedHex (deflated)
const char* const kStoredHex =
    "504b03041400000000000000210087e7ee56980000009800000005001400782e6e70790100100098000000000000"
    "009800000000000000934e554d5059010076007b276465736372273a20273c6634272c2027666f727472616e5f6f"
    "72646572273a2046616c73652c20277368617065273a2028322c2033292c207d2020202020202020202020202020"
    "20202020202020202020202020202020202020202020202020202020202020202020202020202020202020200a00"
    "00c03f000000c0000050400000000000008040000080bf504b030414000000000000002100834ff1829000000090"
    "00000005001400792e6e70790100100090000000000000009000000000000000934e554d5059010076007b276465"
    "736372273a20273c6938272c2027666f727472616e5f6f72646572273a2046616c73652c20277368617065273a20"
    "28322c292c207d202020202020202020202020202020202020202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020200a02000000000000000000000000000000504b010214031400"
    "000000000000210087e7ee569800000098000000050000000000000000000000800100000000782e6e7079504b01"
    "02140314000000000000002100834ff18290000000900000000500000000000000000000008001cf000000792e6e"
    "7079504b0506000000000200020066000000960100000000";
const char* const kDeflatedHex =
    "504b03041400000008000000210087e7ee56580000009800000005001400782e6e70790100100098000000000000"
    "0058000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a2aea3a09e965f54529498179f"
    "5f94920a12774bcc294e058a17672416a402f91a463a0ac69a3a0ab50a64032e068603f60c40828121c081010c1a"
    "8074c37e00504b030414000000080000002100834ff182480000009000000005001400792e6e7079010010009000"
    "00000000000048000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9369a1aea3a09e965f54"
    "529498179f5f94920a12774bcc294e058a17672416a402f91a463a9a3a0ab50a14002e2606540000504b01021403"
    "1400000008000000210087e7ee565800000098000000050000000000000000000000800100000000782e6e707950"
    "4b0102140314000000080000002100834ff182480000009000000005000000000000000000000080018f00000079"
    "2e6e7079504b05060000000002000200660000000e0100000000";

std::string write_hex(const TempDir& dir, const std::string& name, const char* hex) {
  std::string bytes;
  for (const char* p = hex; p[0] && p[1]; p += 2)
    bytes += static_cast<char>(std::stoi(std::string(p, 2), nullptr, 16));
  std::ofstream(dir.file(name), std::ios::binary) << bytes;
  return dir.file(name);
}

void expect_xy(const std::map<std::string, ir::Tensor>& a) {
  ASSERT_EQ(a.size(), 2u);
  const ir::Tensor& x = a.at("x");
  EXPECT_EQ(x.dtype(), ir::DType::kF32);
  EXPECT_EQ(x.shape(), (ir::Shape{2, 3}));
  EXPECT_EQ(std::vector<float>(x.data<float>(), x.data<float>() + 6),
            (std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 4.0f, -1.0f}));
  EXPECT_EQ(a.at("y").to_i64(), (std::vector<int64_t>{2, 0}));
}

TEST(Npz, ReadsStoredAndDeflatedArchives) {
  TempDir dir;
  expect_xy(read_npz(write_hex(dir, "s.npz", kStoredHex)));
  expect_xy(read_npz(write_hex(dir, "d.npz", kDeflatedHex)));
}

TEST(Npz, LoadDataTakesTheXYPair) {
  TempDir dir;
  DataOptions o;
  o.test_fraction = 0;
  DataSplit s = load_data(write_hex(dir, "d.npz", kDeflatedHex), o);
  EXPECT_EQ(s.train.size(), 2);
  EXPECT_EQ(s.test.size(), 0);
  EXPECT_EQ(s.train.num_classes, 3);
  EXPECT_EQ(s.train.labels.to_i64(), (std::vector<int64_t>{2, 0}));
}

std::string error_of(const std::string& path) {
  try {
    read_npz(path);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(Npz, DamagedArchivesNameTheFileAndEntry) {
  TempDir dir;
  EXPECT_NE(error_of(dir.file("no.npz")).find("no.npz: no such file"), std::string::npos);
  testing::write_text(dir.file("text.npz"), "this is not a zip archive at all");
  EXPECT_NE(error_of(dir.file("text.npz")).find("not an .npz file"), std::string::npos);
  // Cut off: the central directory is gone.
  std::string cut = write_hex(dir, "cut.npz", kStoredHex);
  std::filesystem::resize_file(cut, 300);
  EXPECT_NE(error_of(cut).find("cut.npz: damaged .npz (zip) archive"), std::string::npos);
  // One flipped byte inside x's stored data: the CRC catches it.
  std::string flip = write_hex(dir, "flip.npz", kStoredHex);
  {
    std::fstream f(flip, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  EXPECT_NE(error_of(flip).find("flip.npz:x.npy: CRC mismatch"), std::string::npos);
}

// Found by npz_fuzzer: the declared uncompressed size was allocated before
// inflating, so a damaged header made a 500-byte archive take gigabytes.
TEST(Npz, ADeclaredSizeIsCheckedNotAllocated) {
  TempDir dir;
  std::string path = write_hex(dir, "big.npz", kDeflatedHex);
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  const size_t central = bytes.find("PK\x01\x02");  // x's central directory entry
  ASSERT_NE(central, std::string::npos);
  bytes.replace(central + 24, 4, "\xF0\xFF\xFF\xFF");  // uncompressed: 4 GiB
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_NE(error_of(path).find("big.npz:x.npy: corrupt deflate data"), std::string::npos)
      << error_of(path);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  EXPECT_LT(usage.ru_maxrss, 512 * 1024) << "KiB at peak: the declared 4 GiB was allocated";
}

TEST(Npy, PairsBySiblingNameOrExplicitly) {
  TempDir dir;
  ir::save_npy(ir::Tensor::from_f32({1, 2, 3, 4, 5, 6}, {3, 2}), dir.file("x_train.npy"));
  ir::save_npy(ir::Tensor::from_i64({0, 1, 1}, {3}), dir.file("y_train.npy"));
  DataOptions o;
  o.test_fraction = 0;
  DataSplit s = load_data(dir.file("x_train.npy"), o);
  EXPECT_EQ(s.train.features.shape(), (ir::Shape{3, 2}));
  EXPECT_EQ(s.train.labels.to_i64(), (std::vector<int64_t>{0, 1, 1}));
  s = load_data(dir.file("x_train.npy") + "," + dir.file("y_train.npy"), o);
  EXPECT_EQ(s.train.num_classes, 2);
  // A label count that does not match.
  ir::save_npy(ir::Tensor::from_i64({0, 1}, {2}), dir.file("y_train.npy"));
  try {
    load_data(dir.file("x_train.npy"), o);
    FAIL() << "no error";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("2 labels for 3 samples"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pipetrain::data
