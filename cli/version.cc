// `pipetrain --version`: the version, the commit it was built from, what the
// build compiled in and the CPU kernels this machine runs (doctor's header).
#include <fmt/core.h>

#include "cli/commands.h"
#include "data/sentencepiece.h"
#include "executor/kernel_check.h"

namespace pipetrain::cli {

extern const char* const kVersion;  // version_info.cc, generated per build
extern const char* const kCommit;
extern const char* const kBuiltIn;

std::string version_text() {
  std::string s = fmt::format("pipetrain {}\n", kVersion);
  s += fmt::format("{:<13} {}\n", "commit", kCommit);
  s += fmt::format("{:<13} {}\n", "backends", kBuiltIn);
  s += fmt::format("{:<13} {}", "sentencepiece", data::sentencepiece_module());
  for (const auto& [what, line] : exec::kernel_environment())
    s += fmt::format("\n{:<13} {}", what, line);
  return s;
}

}  // namespace pipetrain::cli
