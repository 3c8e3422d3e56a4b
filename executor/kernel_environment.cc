// What chooses the CPU kernels on this machine, for pipetrain doctor
// (kernel_check.h): the CPU, its vector extensions, the libraries' choices
// and the variables that override them.
#include <fmt/core.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <oneapi/dnnl/dnnl.h>

#include "executor/cpu/kernels/bf16.h"
#include "executor/cpu/kernels/blas_core.h"
#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/cpu/kernels/dnnl_util.h"
#include "executor/kernel_check.h"

namespace pipetrain::exec {

namespace {

std::string env_or(const char* name, const char* unset) {
  const char* v = std::getenv(name);
  return v ? fmt::format("{}={}", name, v) : unset;
}

}  // namespace

// /proc/cpuinfo's first processor: field -> value.
std::map<std::string, std::string> cpuinfo() {
  std::map<std::string, std::string> fields;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) break;  // the first processor's block ends
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon), value = line.substr(colon + 1);
    key.erase(key.find_last_not_of(" \t") + 1);
    value.erase(0, value.find_first_not_of(' '));
    fields[key] = value;
  }
  return fields;
}

std::vector<std::pair<std::string, std::string>> kernel_environment() {
  std::vector<std::pair<std::string, std::string>> lines;
  auto info = cpuinfo();
  lines.emplace_back(
      "CPU", fmt::format("{} (family {}, model {}), {} logical cores",
                         info.count("model name") ? info["model name"] : "unknown",
                         info["cpu family"], info["model"], std::thread::hardware_concurrency()));
  // The extensions that decide kernel choice, in the order they arrived.
  static const char* kFlags[] = {"sse4_2",   "avx",         "avx2",        "fma",
                                 "avx_vnni", "avx512f",     "avx512dq",    "avx512bw",
                                 "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                                 "amx_tile", "amx_bf16",    "amx_int8"};
  std::string have, lack;
  std::istringstream flags(info["flags"]);
  std::set<std::string> present{std::istream_iterator<std::string>(flags), {}};
  for (const char* f : kFlags) (present.count(f) ? have : lack) += std::string(" ") + f;
  lines.emplace_back("flags", fmt::format("has{}{}", have.empty() ? " none of them" : have,
                                          lack.empty() ? "" : "; lacks" + lack));
  lines.emplace_back(
      "OpenBLAS",
      fmt::format("{} kernels ({}; {})", cpu::blas_core(),
                  cpu::openblas_fell_back()
                      ? "its fallback on a CPU model it does not know: GEMMs run on oneDNN's sgemm"
                      : "its own choice",
                  env_or("OPENBLAS_CORETYPE", "OPENBLAS_CORETYPE unset")));
  const dnnl_version_t* v = dnnl_version();
  lines.emplace_back(
      "oneDNN",
      fmt::format("{}.{}.{}, ISA {} ({})", v->major, v->minor, v->patch, cpu::dnnl_isa_name(),
                  env_or("ONEDNN_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA unset")));
  lines.emplace_back("kernels", cpu::dnnl_util::representative_kernels());
  const int64_t block = cpu::channel_block(64);
  lines.emplace_back(
      "layout", fmt::format("activations between convolutions {} ({})",
                            block == 0    ? std::string("row-major")
                            : block == 64 ? std::string("blocked as nhwc")
                                          : fmt::format("blocked as nChw{}c", block),
                            env_or("PIPETRAIN_BLOCKED_LAYOUT", "PIPETRAIN_BLOCKED_LAYOUT unset")));
  return lines;
}

}  // namespace pipetrain::exec
