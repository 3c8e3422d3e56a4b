#include "executor/kernel_check_cache.h"

#include <fmt/core.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "executor/cpu/kernels/kernel_paths.h"

extern char** environ;

namespace pipetrain::exec {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kFormat = 1;  // bump when the file's fields or the key's parts change

// FNV-1a, 64 bits: a file name, not a defence against forgery.
uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// The first processor's /proc/cpuinfo fields, less those that move while the machine
// runs (its clock and the BogoMIPS measured from it).
std::string cpu_identity() {
  std::string out;
  for (const auto& [field, value] : cpuinfo())
    if (field != "cpu MHz" && field != "bogomips") out += field + ": " + value + "\n";
  return out;
}

std::string file_identity(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return path + " (no file)\n";
  return fmt::format("{} {} {} {} {}.{}\n", path, st.st_dev, st.st_ino, st.st_size,
                     st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

// Every object mapped into the process: the executable (dl_iterate_phdr's
// unnamed first entry), then the shared libraries in load order.
std::string loaded_objects() {
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        static_cast<std::vector<std::string>*>(out)->emplace_back(info->dlpi_name ? info->dlpi_name
                                                                                 : "");
        return 0;
      },
      &names);
  std::string out;
  std::error_code ec;
  for (const std::string& n : names)
    out += file_identity(n.empty() ? fs::read_symlink("/proc/self/exe", ec).string() : n);
  return out;
}

// The variables that steer the kernels' choice or their threads, sorted.
std::string steering_variables() {
  static const char* kPrefixes[] = {"OPENBLAS_", "ONEDNN_", "DNNL_", "OMP_",
                                    "GOMP_",     "PIPETRAIN_", "LD_"};
  std::vector<std::string> vars;
  for (char** e = environ; e && *e; ++e) {
    const std::string v = *e;
    for (const char* p : kPrefixes)
      if (v.rfind(p, 0) == 0) vars.push_back(v);
  }
  std::sort(vars.begin(), vars.end());
  std::string out;
  for (const auto& v : vars) out += v + "\n";
  return out;
}

json to_json(const KernelFamilyCheck& f) {
  return {{"family", f.family},       {"path", f.path},
          {"cases", f.cases},         {"worst", f.worst},
          {"worst_case", f.worst_case}, {"skipped", f.skipped},
          {"skip_reason", f.skip_reason}, {"avoided", f.avoided},
          {"fallback", f.fallback},   {"fallback_worst", f.fallback_worst},
          {"seconds", f.seconds}};
}

KernelFamilyCheck family_from_json(const json& j) {
  KernelFamilyCheck f;
  f.family = j.at("family").get<std::string>();
  f.path = j.at("path").get<std::string>();
  f.cases = j.at("cases").get<int>();
  f.worst = j.at("worst").get<double>();
  f.worst_case = j.at("worst_case").get<std::string>();
  f.skipped = j.at("skipped").get<bool>();
  f.skip_reason = j.at("skip_reason").get<std::string>();
  f.avoided = j.at("avoided").get<bool>();
  f.fallback = j.at("fallback").get<std::string>();
  f.fallback_worst = j.at("fallback_worst").get<double>();
  f.seconds = j.at("seconds").get<double>();
  return f;
}

std::string cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
  };
  if (std::string d = env("PIPETRAIN_CACHE_DIR"); !d.empty()) return d;
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/pipetrain";
  if (std::string d = env("HOME"); !d.empty()) return d + "/.cache/pipetrain";
  return "";
}

// Each rebuild or library upgrade leaves a verdict no process will ask for again:
// past kKeep files, the oldest go.
void prune(const fs::path& dir) {
  constexpr size_t kKeep = 64;
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("kernel-check-", 0) == 0 && it->path().extension() == ".json")
      files.emplace_back(fs::last_write_time(it->path(), ec), it->path());
  }
  if (files.size() <= kKeep) return;
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i + kKeep < files.size(); ++i) fs::remove(files[i].second, ec);
}

}  // namespace

std::string kernel_check_key() {
  const std::string blob =
      fmt::format("format {}\ncores {}\n{}{}{}", kFormat, std::thread::hardware_concurrency(),
                  cpu_identity(), loaded_objects(), steering_variables());
  // Two differently seeded halves: 128 bits, so that distinct setups never meet by chance.
  return fmt::format("{:016x}{:016x}", fnv1a(blob, 0xcbf29ce484222325ull),
                     fnv1a(blob, 0x84222325cbf29ce4ull));
}

std::string kernel_check_cache_file(const std::string& key) {
  const char* off = std::getenv("PIPETRAIN_KERNEL_CHECK_CACHE");
  if (off && std::string(off) == "off") return "";
  const std::string dir = cache_dir();
  return dir.empty() ? "" : dir + "/kernel-check-" + key + ".json";
}

std::optional<KernelCheckReport> restore_kernel_check(const std::string& file,
                                                      const std::string& key) {
  if (file.empty()) return std::nullopt;
  std::ifstream in(file);
  if (!in) return std::nullopt;
  KernelCheckReport report;
  std::vector<cpu::KernelPath> paths;
  cpu::AvoidedOps ops;
  try {
    const json j = json::parse(in);
    if (j.at("format").get<int>() != kFormat || j.at("key").get<std::string>() != key)
      return std::nullopt;
    report.seconds = j.at("seconds").get<double>();
    for (const json& f : j.at("families")) report.families.push_back(family_from_json(f));
    for (const json& p : j.at("avoided_paths")) {
      const std::string name = p.get<std::string>();
      int found = -1;
      for (int i = 0; i < cpu::kKernelPathCount; ++i)
        if (name == cpu::kernel_path_name(static_cast<cpu::KernelPath>(i))) found = i;
      if (found < 0) return std::nullopt;
      paths.push_back(static_cast<cpu::KernelPath>(found));
    }
    ops.everywhere = j.at("avoided_ops").get<std::set<std::string>>();
    ops.blocked = j.at("avoided_blocked_ops").get<std::set<std::string>>();
  } catch (const std::exception&) {
    return std::nullopt;  // a file cut short or edited by hand: run the check instead
  }
  cpu::clear_avoided();
  for (cpu::KernelPath p : paths) cpu::set_path_avoided(p, true);
  for (const auto& op : ops.everywhere) cpu::avoid_op(op, false);
  for (const auto& op : ops.blocked) cpu::avoid_op(op, true);
  return report;
}

bool store_kernel_check(const std::string& file, const std::string& key,
                        const KernelCheckReport& report) {
  if (file.empty()) return false;
  json families = json::array(), paths = json::array();
  for (const auto& f : report.families) families.push_back(to_json(f));
  for (int i = 0; i < cpu::kKernelPathCount; ++i)
    if (cpu::path_avoided(static_cast<cpu::KernelPath>(i)))
      paths.push_back(cpu::kernel_path_name(static_cast<cpu::KernelPath>(i)));
  const cpu::AvoidedOps ops = cpu::avoided_ops();
  const json j = {{"format", kFormat},
                  {"key", key},
                  {"seconds", report.seconds},
                  {"families", families},
                  {"avoided_paths", paths},
                  {"avoided_ops", ops.everywhere},
                  {"avoided_blocked_ops", ops.blocked}};
  std::error_code ec;
  const fs::path target(file);
  fs::create_directories(target.parent_path(), ec);
  // Processes started together may all write: each its own temporary, renamed over.
  const fs::path tmp = target.string() + fmt::format(".tmp{}", ::getpid());
  {
    std::ofstream out(tmp);
    out << j.dump(1) << "\n";
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return false;
  }
  prune(target.parent_path());
  return true;
}

}  // namespace pipetrain::exec
