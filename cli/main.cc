// The pipetrain command line: subcommands parse, call the library, print.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "ir/error.h"

int main(int argc, char** argv) {
  // Line-buffered even into a pipe or file: a job killed mid-run (SIGKILL
  // under a supervisor, a lost node) keeps every status line it printed.
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  pipetrain::cli::set_command_line(argc, argv);
  CLI::App app{"pipetrain: train ONNX models with PipeDream-style pipeline parallelism"};
  app.require_subcommand(1);
  pipetrain::cli::add_inspect_command(app);
  pipetrain::cli::add_run_command(app);
  pipetrain::cli::add_train_command(app);
  pipetrain::cli::add_generate_command(app);
  pipetrain::cli::add_tokenize_command(app);
  pipetrain::cli::add_zoo_compare_command(*pipetrain::cli::add_zoo_command(app));
  pipetrain::cli::add_profile_command(app);
  pipetrain::cli::add_partition_command(app);
  pipetrain::cli::add_simulate_command(app);
  pipetrain::cli::add_launch_command(app);
  pipetrain::cli::add_doctor_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const pipetrain::cli::ExitRequest& e) {
    return e.code;
  } catch (const pipetrain::ModelError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const pipetrain::PlanError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
