// libFuzzer target: a PipeDream graph.txt profile, read, validated,
// partitioned and simulated as `pipetrain partition graph.txt` does.
#include "fuzz/fuzz_input.h"
#include "fuzz/use_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace pf = pipetrain::fuzz;
  const std::string path = pf::input_file(data, size, "graph.txt");  // .txt: the graph.txt reader
  pf::expect_clean([&] { pf::use_profile(pipetrain::partitioner::load_profile(path)); });
  return 0;
}
