// Pipeline workers on cores of their own: when the workers' threads fit the
// cores this process may run on, worker w's thread (and the OpenMP team its
// kernels fork, whose threads inherit the mask) is bound to its own group of
// cores, so the workers never trade cores or each other's caches and the
// scheduler never stacks two of them on one core while another idles.
#pragma once

#include <vector>

namespace pipetrain::exec {

/// The cores (CPU numbers) of each of `workers` workers of `threads` threads:
/// consecutive groups of the calling process's allowed CPUs, in order. Empty
/// when they do not fit (workers x threads > allowed CPUs) or the mask cannot
/// be read: the workers then float.
std::vector<std::vector<int>> worker_core_groups(int workers, int threads);

/// Binds the calling thread to `cores` (no-op when empty). Returns false when
/// the system refused (the thread then keeps floating).
bool pin_calling_thread(const std::vector<int>& cores);

/// The CPUs the calling thread may run on, in order.
std::vector<int> allowed_cpus();

}  // namespace pipetrain::exec
