// Stopping a long run without losing it: while a StopSignals lives, the first
// SIGINT, SIGTERM (a cluster's notice before preemption) or SIGUSR1 (which
// mpirun forwards to every rank) asks the run to stop at its next round
// boundary, where it checkpoints; a second one exits at once with 128 + the
// signal, leaving the last finished checkpoint as it was (checkpoints are
// renamed into place, never written where they are read).
#pragma once

#include <atomic>

namespace pipetrain::cli {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// Set by the first signal.
  static const std::atomic<bool>& requested();
  /// 128 + the first signal (SIGUSR1 counts as SIGINT: it is mpirun's Ctrl-C); 0 before one.
  static int exit_code();
  /// "SIGINT", "SIGTERM" or "SIGUSR1" for the first signal.
  static const char* name();
  /// The stop is done (its checkpoint written): later signals are ignored
  /// while the run exits. Under mpirun the first rank to exit with 130 makes
  /// mpirun abort the job, which sends SIGTERM to every rank still tearing
  /// down; without this such a rank took it for a second Ctrl-C.
  static void mark_stopped();
};

}  // namespace pipetrain::cli
