// libFuzzer target: a `text:` corpus file (UTF-8 checked, tokenized byte by
// byte, windowed) and the same bytes as a `tokens:` .bin stream of uint16.
#include "data/dataset.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace pt = pipetrain;
  pt::data::DataOptions options;
  options.seq_len = 4;
  const std::string text = pt::fuzz::input_file(data, size, "corpus.txt");
  pt::fuzz::expect_clean([&] { pt::data::load_data("text:" + text, options); });
  const std::string bin = pt::fuzz::input_file(data, size, "tokens.bin");
  pt::fuzz::expect_clean([&] { pt::data::load_data("tokens:" + bin, options); });
  return 0;
}
