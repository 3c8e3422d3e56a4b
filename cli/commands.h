// One function per subcommand: registers its options and its callback.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace pipetrain::cli {

/// Thrown by a command to end the program with `code` after it has said why
/// (an interrupted training run: 130).
struct ExitRequest {
  int code = 1;
};

/// The program's argv, kept by main (a supervised run starts itself again).
void set_command_line(int argc, char** argv);
const std::vector<std::string>& command_line();

void add_inspect_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_evaluate_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
/// The `zoo` group (list, export); returns it so other files can add
/// subcommands to the group.
CLI::App* add_zoo_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_partition_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_doctor_command(CLI::App& app);
/// `pipetrain --version`: version, commit, backends, the CPU kernels chosen.
std::string version_text();
/// `zoo compare`, added to the group add_zoo_command returns.
void add_zoo_compare_command(CLI::App& zoo);

}  // namespace pipetrain::cli
