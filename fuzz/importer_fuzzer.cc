// libFuzzer target: arbitrary bytes into the ONNX importer. Any input must
// end in a parsed graph or a pipetrain::Error, never a crash or a hang.
#include "fuzz/fuzz_input.h"
#include "importer/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  pipetrain::importer::ImportOptions opts;
  opts.batch = 2;
  pipetrain::fuzz::expect_clean(
      [&] { pipetrain::importer::import_model_bytes(bytes, "/nonexistent-fuzz-dir", opts); });
  return 0;
}
