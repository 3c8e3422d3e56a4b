// The kernel check's verdict, kept between processes. The check (kernel_check.h)
// costs 0.1 s of CPU per process in a release build and over 1 s under the
// sanitizers, and a test suite or a launcher starts hundreds of processes on the
// same machine with the same binaries: each one after the first reads the verdict
// from a file and applies the same decisions. The file is named by a key over
// everything the verdict depends on: the CPU (/proc/cpuinfo's first processor,
// less its clock), every loaded object (the executable, OpenBLAS, oneDNN, libgomp,
// ...: path, inode, size, modification time), the logical core count and the
// variables that steer the kernels (OPENBLAS_*, ONEDNN_*, DNNL_*, OMP_*, GOMP_*,
// PIPETRAIN_*, LD_*). A change in any of them is a new key, so a rebuilt binary,
// an upgraded library or another CPU runs the check afresh. A file that cannot be
// read, parsed or written is ignored: the check runs instead.
//
// Where: $PIPETRAIN_CACHE_DIR, else $XDG_CACHE_HOME/pipetrain, else
// $HOME/.cache/pipetrain. PIPETRAIN_KERNEL_CHECK_CACHE=off runs the check in
// every process; `pipetrain doctor` always runs it and rewrites the file.
#pragma once

#include <optional>
#include <string>

#include "executor/kernel_check.h"

namespace pipetrain::exec {

/// The key of this process's verdict (hex), as described above.
std::string kernel_check_key();

/// The file the verdict for `key` lives in; empty when caching is off or no
/// directory is known.
std::string kernel_check_cache_file(const std::string& key);

/// The report stored in `file` for `key`, with its decisions (the avoided paths
/// and ops) put in force in place of the current ones; or nothing, changing
/// nothing, where the file is missing, unreadable, malformed or for another key.
std::optional<KernelCheckReport> restore_kernel_check(const std::string& file,
                                                      const std::string& key);

/// Writes `report` and the decisions in force now (the avoided paths and ops)
/// to `file` for `key`, atomically (a temporary file renamed over it). Returns
/// false, writing nothing, where that fails.
bool store_kernel_check(const std::string& file, const std::string& key,
                        const KernelCheckReport& report);

}  // namespace pipetrain::exec
