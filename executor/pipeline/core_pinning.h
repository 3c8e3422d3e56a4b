// Pipeline workers on cores of their own: worker w's thread (and the OpenMP
// team its kernels fork, whose threads inherit the mask) bound to its own
// group of the cores this process may run on, so the workers never trade
// cores or each other's caches and the scheduler never stacks two of them on
// one core while another idles.
#pragma once

#include <string>
#include <vector>

namespace pipetrain::exec {

/// When a pipeline binds its workers. kAuto: only when their threads take
/// every CPU the process may use (the job owns those cores; on a larger
/// machine a second job started the same way would otherwise be bound to
/// the same first cores). kOn: whenever they fit. kOff: never.
enum class PinWorkers { kAuto, kOn, kOff };
/// "auto", "on" or "off"; throws ModelError naming anything else.
PinWorkers parse_pin_workers(const std::string& s);
/// The cores of each worker under `mode`: worker_core_groups() when it
/// binds, else empty.
std::vector<std::vector<int>> pinned_core_groups(PinWorkers mode, int workers, int threads);

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
