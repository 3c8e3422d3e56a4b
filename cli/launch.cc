// `pipetrain launch [--max-restarts K] [--log FILE] -- COMMAND...`: runs a
// training command (pipetrain train ..., or mpirun ... pipetrain train ...
// --comm mpi) and restarts it from its newest valid checkpoint when it dies.
#include "cli/commands.h"
#include "cli/supervisor.h"

namespace pipetrain::cli {

namespace {
std::vector<std::string> g_command_line;
}  // namespace

void set_command_line(int argc, char** argv) {
  g_command_line.assign(argv, argv + argc);
}

const std::vector<std::string>& command_line() {
  return g_command_line;
}

void add_launch_command(CLI::App& app) {
  auto o = std::make_shared<SupervisorOptions>();
  auto command = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Run a training command and restart it from its newest valid checkpoint when it dies "
      "(a killed rank, an aborted job): pipetrain launch --max-restarts 3 -- mpirun -np 4 "
      "pipetrain train ... --comm mpi --checkpoint-every 100");
  cmd->add_option("--max-restarts", o->max_restarts, "Restarts at most")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--log", o->log_path, "Also append each start, restart and its cause here");
  cmd->add_option("--hang-timeout", o->hang_timeout_s,
                  "Kill and restart the job when it shows no progress (no round finished) for "
                  "this many seconds: a hung or stopped process (0: never; allow for startup)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("command", *command, "The command, after --")->required();
  cmd->callback([o, command] {
    const int code = run_supervised(*command, *o);
    if (code != 0) throw ExitRequest{code};
  });
}

}  // namespace pipetrain::cli
