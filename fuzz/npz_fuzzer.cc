// libFuzzer target: an .npz archive (zip, stored or deflated, zip64) loaded
// as a dataset, as `--data file.npz` does.
#include "data/dataset.h"
#include "data/npz.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace pt = pipetrain;
  const std::string path = pt::fuzz::input_file(data, size, "input.npz");
  pt::fuzz::expect_clean([&] { pt::data::read_npz(path); });
  pt::fuzz::expect_clean([&] { pt::data::load_data(path); });
  return 0;
}
