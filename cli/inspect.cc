#include "cli/commands.h"
namespace pipetrain::cli {
void add_inspect_command(CLI::App& app) { app.add_subcommand("inspect", "Describe a model"); }
}  // namespace pipetrain::cli
