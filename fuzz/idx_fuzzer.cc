// libFuzzer target: an IDX file (MNIST's format, plain or gzipped), decoded
// and turned into features and labels.
#include "data/idx.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace pt = pipetrain;
  const std::string path = pt::fuzz::input_file(data, size, "input-idx");
  pt::fuzz::expect_clean([&] {
    pt::data::IdxArray a = pt::data::read_idx(path);
    pt::fuzz::expect_clean([&] { pt::data::idx_to_features(a); });
    pt::fuzz::expect_clean([&] { pt::data::idx_to_labels(a, path); });
  });
  return 0;
}
