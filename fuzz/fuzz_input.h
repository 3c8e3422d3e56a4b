// Shared by the libFuzzer targets: the input as a file (most parsers take a
// path, as the CLI hands it to them) and the contract every target checks.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "ir/error.h"

namespace pipetrain::fuzz {

/// Writes the input to this process's scratch file `name` (libFuzzer runs
/// one input at a time) and returns its path. The folder goes at exit.
inline std::string input_file(const uint8_t* data, size_t size, const std::string& name) {
  struct Scratch {
    std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                ("pipetrain-fuzz-" + std::to_string(::getpid()));
    Scratch() { std::filesystem::create_directories(dir); }
    ~Scratch() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static Scratch scratch;
  const std::string path = (scratch.dir / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

/// Runs `parse`. A pipetrain::Error (one clear message) is the answer to bad
/// input; anything else escapes and libFuzzer reports it as a crash. With
/// PIPETRAIN_FUZZ_VERBOSE set, the messages are printed (to check that the
/// seeds load: `PIPETRAIN_FUZZ_VERBOSE=1 ./csv_fuzzer corpus/*`).
template <typename F>
void expect_clean(F&& parse) {
  try {
    parse();
  } catch (const pipetrain::Error& e) {
    static const bool verbose = std::getenv("PIPETRAIN_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
  }
}

}  // namespace pipetrain::fuzz
