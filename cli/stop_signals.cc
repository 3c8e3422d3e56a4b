#include "cli/stop_signals.h"

#include <unistd.h>

#include <csignal>

namespace pipetrain::cli {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGUSR1};
std::atomic<bool> g_requested{false};
std::atomic<int> g_first{0};
std::atomic<bool> g_stopped{false};  // the stop is done: the run is exiting
struct sigaction g_previous[3];

extern "C" void on_stop_signal(int sig) {
  // Only async-signal-safe calls here: atomics, write, _exit.
  if (g_stopped.load()) return;
  int expected = 0;
  if (g_first.compare_exchange_strong(expected, sig)) {
    g_requested = true;
    return;
  }
  static const char kMsg[] =
      "\nsecond signal: exiting now; the last checkpoint written stays as it was\n";
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  ::_exit(128 + (sig == SIGUSR1 ? SIGINT : sig));
}

}  // namespace

StopSignals::StopSignals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &g_previous[i]);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

const std::atomic<bool>& StopSignals::requested() {
  return g_requested;
}

int StopSignals::exit_code() {
  const int sig = g_first.load();
  return sig == 0 ? 0 : 128 + (sig == SIGUSR1 ? SIGINT : sig);
}

void StopSignals::mark_stopped() {
  g_stopped = true;
}

const char* StopSignals::name() {
  switch (g_first.load()) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    default: return "no signal";
  }
}

}  // namespace pipetrain::cli
