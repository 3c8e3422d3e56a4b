#include "ir/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/error.h"

namespace pipetrain::ir {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("pipetrain_npy_test_" + name)).string();
}

TEST(Npy, RoundTripKeepsDtypeShapeAndBytes) {
  Tensor f = Tensor::from_f32({1.5f, -2.f, 3.25f, 0.f, 7.f, 8.f}, {2, 3});
  Tensor i = Tensor::from_i64({5, -6, 7}, {3});
  Tensor s = Tensor::scalar_f32(42.f);
  for (const Tensor& t : {f, i, s}) {
    std::string p = temp_path("rt.npy");
    save_npy(t, p);
    Tensor back = load_npy(p);
    EXPECT_EQ(back.dtype(), t.dtype());
    EXPECT_EQ(back.shape(), t.shape());
    for (int64_t k = 0; k < t.numel(); ++k) EXPECT_EQ(back.at(k), t.at(k));
    std::remove(p.c_str());
  }
}

TEST(Npy, BadFilesNameTheFileAndTheProblem) {
  std::string p = temp_path("bad.npy");
  {
    std::ofstream out(p, std::ios::binary);
    out << "not numpy at all";
  }
  try {
    load_npy(p);
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  // A header that promises more data than the file holds.
  save_npy(Tensor::from_f32({1, 2, 3, 4}, {4}), p);
  std::filesystem::resize_file(p, std::filesystem::file_size(p) - 4);
  try {
    load_npy(p);
    FAIL();
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("shorter"), std::string::npos) << e.what();
  }
  std::remove(p.c_str());
  EXPECT_THROW(load_npy(temp_path("missing.npy")), ModelError);
}

// Found by npy_fuzzer: a header is checked before anything is allocated.
TEST(Npy, DamagedHeadersAreRefusedBeforeAllocating) {
  auto with_header = [](const std::string& dict) {
    std::string h = dict;
    h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
    h += '\n';
    std::string f("\x93NUMPY\x01\x00", 8);
    f += static_cast<char>(h.size() & 0xFF);
    f += static_cast<char>(h.size() >> 8);
    return f + h + std::string(16, '\0');
  };
  auto error_of = [&](const std::string& dict) {
    std::istringstream in(with_header(dict));
    try {
      read_npy(in, "x.npy");
    } catch (const ModelError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Terabytes claimed by a 16-byte body: refused, not allocated.
  EXPECT_NE(error_of("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }")
                .find("x.npy: .npy data is shorter than its shape"),
            std::string::npos);
  EXPECT_NE(error_of("{'descr': '<f4', 'fortran_order': False, 'shape': (4, x), }")
                .find("bad dimension 'x'"),
            std::string::npos);
  EXPECT_NE(error_of("{'descr': '<f4', 'fortran_order': False, 'shape': 4, }").find("not a tuple"),
            std::string::npos);
  EXPECT_NE(error_of("{'descr': <f4, 'fortran_order': False, 'shape': (4,), }").find("descr"),
            std::string::npos);
  EXPECT_EQ(error_of("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"), "no error");
}

}  // namespace
}  // namespace pipetrain::ir
