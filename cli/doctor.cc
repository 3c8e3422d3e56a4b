// `pipetrain doctor`: what chooses the CPU kernels on this machine and the
// kernel check's verdict on each family (executor/kernel_check.h).
#include <fmt/core.h>

#include "cli/commands.h"
#include "executor/kernel_check.h"
#include "executor/kernel_check_cache.h"

namespace pipetrain::cli {

namespace {

std::string verdict(const exec::KernelFamilyCheck& f) {
  if (f.skipped) return "skipped: " + f.skip_reason;
  if (!f.avoided) return "ok";
  return fmt::format("WRONG ({}): avoided, {} instead ({})", f.worst_case, f.fallback,
                     f.fallback_ok() ? fmt::format("checked, {:.2f}", f.fallback_worst)
                                     : fmt::format("ALSO WRONG, {:.3g}", f.fallback_worst));
}

void doctor() {
  fmt::print(
      "pipetrain doctor: the CPU kernels this machine runs, checked against a reference\n\n");
  for (const auto& [what, line] : exec::kernel_environment()) fmt::print("{:<9} {}\n", what, line);
  // The check ran when the first CPU backend was made; run it again here so
  // that its report covers this process's environment as it is now.
  const exec::KernelCheckReport report = exec::run_kernel_check();
  // The verdict later processes restore instead of checking again (kernel_check_cache.h).
  const std::string key = exec::kernel_check_key();
  const std::string file = exec::kernel_check_cache_file(key);
  const bool kept = exec::store_kernel_check(file, key, report);
  fmt::print("\n{:<44} {:<30} {:>5} {:>9} {:>6}  {}\n", "kernel family", "path", "cases",
             "worst/tol", "ms", "result");
  int avoided = 0, skipped = 0;
  for (const auto& f : report.families) {
    avoided += f.avoided;
    skipped += f.skipped;
    fmt::print("{:<44} {:<30} {:>5} {:>9.3g} {:>6.1f}  {}\n", f.family, f.path, f.cases, f.worst,
               f.seconds * 1e3, verdict(f));
  }
  fmt::print(
      "\nkernel check: {} families in {:.0f} ms, {} avoided, {} skipped (worst/tol: the worst "
      "case's error over its tolerance; above 1 is wrong)\n",
      report.families.size(), report.seconds * 1e3, avoided, skipped);
  fmt::print("verdict {} (PIPETRAIN_KERNEL_CHECK_CACHE=off checks in every process)\n",
             kept ? "kept for later processes in " + file
                  : file.empty() ? std::string("not kept") : "not kept: cannot write " + file);
  for (const auto& f : report.families)
    if (f.avoided) fmt::print("{}\n", exec::avoided_notice(f));
  if (!report.trustworthy()) {
    fmt::print(stderr,
               "error: a kernel family and its fallback both disagree with the reference on this "
               "CPU: results computed here cannot be trusted\n");
    throw ExitRequest{1};
  }
}

}  // namespace

void add_doctor_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "doctor",
      "Check this machine's CPU kernels (BLAS, oneDNN, our own, in each layout) against a "
      "reference and show which ones pipetrain uses");
  cmd->callback([] { doctor(); });
}

}  // namespace pipetrain::cli
