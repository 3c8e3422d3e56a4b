#include "executor/pipeline/core_pinning.h"

#include <pthread.h>
#include <sched.h>

#include "ir/error.h"

namespace pipetrain::exec {

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<std::vector<int>> worker_core_groups(int workers, int threads) {
  const std::vector<int> cpus = allowed_cpus();
  if (workers <= 0 || threads <= 0 ||
      static_cast<size_t>(workers) * static_cast<size_t>(threads) > cpus.size())
    return {};
  std::vector<std::vector<int>> groups(static_cast<size_t>(workers));
  for (size_t w = 0; w < groups.size(); ++w)
    groups[w].assign(
        cpus.begin() + static_cast<std::ptrdiff_t>(w * static_cast<size_t>(threads)),
        cpus.begin() + static_cast<std::ptrdiff_t>((w + 1) * static_cast<size_t>(threads)));
  return groups;
}

PinWorkers parse_pin_workers(const std::string& s) {
  if (s == "auto") return PinWorkers::kAuto;
  if (s == "on") return PinWorkers::kOn;
  if (s == "off") return PinWorkers::kOff;
  throw ModelError("--pin: '" + s + "' is not auto, on or off");
}

std::vector<std::vector<int>> pinned_core_groups(PinWorkers mode, int workers, int threads) {
  if (mode == PinWorkers::kOff) return {};
  if (mode == PinWorkers::kAuto &&
      static_cast<size_t>(workers) * static_cast<size_t>(threads) != allowed_cpus().size())
    return {};
  return worker_core_groups(workers, threads);
}

bool pin_calling_thread(const std::vector<int>& cores) {
  if (cores.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

}  // namespace pipetrain::exec
