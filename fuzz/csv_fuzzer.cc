// libFuzzer target: a CSV dataset (plain or gzipped), loaded, split and
// standardised as `--data file.csv --normalize` does.
#include "data/dataset.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace pt = pipetrain;
  const std::string path = pt::fuzz::input_file(data, size, "input.csv");
  pt::data::DataOptions options;
  options.normalize = true;
  pt::fuzz::expect_clean([&] { pt::data::load_data(path, options); });
  return 0;
}
