// Supervision: run a training command, and when it dies (a killed process,
// an aborted MPI job, a crash) run it again from the newest checkpoint that
// verifies, up to a limit. The executor only promises clean aborts and exact
// resumes; this is the layer above it (DESIGN.md, "Supervision").
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pipetrain::cli {

struct SupervisorOptions {
  int max_restarts = 3;
  /// Where each start and restart is logged besides stderr ("" for none).
  std::string log_path;
  /// Kill and restart a job whose heartbeat (touch_heartbeat(), at every round boundary)
  /// is older than this many seconds: a hung or stopped process. 0: no watchdog.
  double hang_timeout_s = 0;
};

/// Runs `command` (argv: a program and its arguments, e.g. pipetrain train ... or
/// mpirun -np 4 pipetrain train ... --comm mpi) in a process group of its own and returns
/// its exit code. Exit 0 ends it; so do 2 (bad input: a rerun fails the same way) and the
/// codes of a stop the supervisor forwarded (SIGINT, SIGTERM: 130, 143). Anything else (a
/// signal, 1, an abort) starts it again with `--resume latest` (replacing any --resume),
/// at most max_restarts times. SIGINT and SIGTERM sent to the supervisor go to the
/// command once (to mpirun as SIGUSR1, which it forwards to every rank as a stop).
int run_supervised(const std::vector<std::string>& command, const SupervisorOptions& options);

/// `train --max-restarts K`: when this process is not itself supervised, runs this same
/// command line (less --max-restarts) under run_supervised and returns its exit code; nullopt
/// inside the supervised child, which then trains.
std::optional<int> supervise_self(int max_restarts, double hang_timeout_s);

/// Under a supervisor with a hang timeout: tells it the job is making progress.
void touch_heartbeat();

/// The command a restart runs: `command` with `--resume latest` (replacing any --resume).
std::vector<std::string> resume_latest(std::vector<std::string> command);

}  // namespace pipetrain::cli
