// libFuzzer target: a .npy file, read as an array (features, labels, named
// inputs) and as a `tokens:` stream.
#include <sstream>

#include "data/dataset.h"
#include "fuzz/fuzz_input.h"
#include "ir/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace pt = pipetrain;
  pt::fuzz::expect_clean([&] {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    pt::ir::read_npy(in, "input.npy");
  });
  const std::string path = pt::fuzz::input_file(data, size, "input.npy");
  pt::data::DataOptions options;
  options.seq_len = 4;
  pt::fuzz::expect_clean([&] { pt::data::load_data("tokens:" + path, options); });
  return 0;
}
