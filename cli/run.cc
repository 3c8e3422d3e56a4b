#include "cli/commands.h"
namespace pipetrain::cli {
void add_run_command(CLI::App& app) { app.add_subcommand("run", "Run a model forward"); }
}  // namespace pipetrain::cli
