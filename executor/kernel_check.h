// The kernel check: before the CPU backend first runs in a process, each
// family of kernels it may choose (OpenBLAS's and oneDNN's GEMMs, oneDNN's
// matmuls and convolutions, our pooling and BatchNorm kernels in each layout)
// runs a few small cases against a reference: plain double-sum loops for the
// GEMMs, the portable backend (the device kernels' code, run on the host) for
// the ops. A family that disagrees is avoided (cpu/kernels/kernel_paths.h)
// and its fallback checked the same way, so a library kernel that computes
// wrong on this CPU (one its authors never saw) cannot silently corrupt a
// gradient. `pipetrain doctor` prints the whole report.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pipetrain::exec {

struct KernelFamilyCheck {
  std::string family;  // what a user reads: "GEMM on OpenBLAS (SkylakeX)"
  std::string path;    // the path or op it decides: "openblas-gemm", "MaxPoolGrad:blocked"
  int cases = 0;
  double worst = 0;  // the worst case's error over its tolerance: above 1 disagrees
  std::string worst_case;
  bool skipped = false;  // this CPU never runs it (no brgemm matmul, no blocked layout)
  std::string skip_reason;
  bool avoided = false;  // it disagreed: the backend runs `fallback` instead
  std::string fallback;
  double fallback_worst = 0;  // the fallback's worst case over its tolerance
  double seconds = 0;
  bool ok() const { return skipped || worst <= 1.0; }
  bool fallback_ok() const { return !avoided || fallback_worst <= 1.0; }
};

struct KernelCheckReport {
  std::vector<KernelFamilyCheck> families;
  double seconds = 0;
  /// Every family agrees, or was avoided for a fallback that does.
  bool trustworthy() const;
};

/// Runs every family's cases against its reference, avoids those that
/// disagree and checks their fallbacks. Clears earlier decisions first.
KernelCheckReport run_kernel_check();

/// run_kernel_check once per process, before the first CPU backend runs
/// (make_cpu_backend calls it), or the verdict an earlier process kept for this
/// same setup (kernel_check_cache.h); says on stderr, one line each, what it avoided.
const KernelCheckReport& ensure_kernel_check();

/// /proc/cpuinfo's first processor: field -> value (empty where unreadable).
std::map<std::string, std::string> cpuinfo();

/// What chooses the kernels here, as (what, description) lines: the CPU and
/// its vector extensions, OpenBLAS's kernel set, oneDNN's ISA, the blocked
/// layout, and the environment variables that override them.
std::vector<std::pair<std::string, std::string>> kernel_environment();

/// The line ensure_kernel_check prints for an avoided family.
std::string avoided_notice(const KernelFamilyCheck& f);

}  // namespace pipetrain::exec
