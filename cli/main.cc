// The pipetrain command line: subcommands parse, call the library, print.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "ir/error.h"

namespace {

// A message as valid UTF-8: names read from a corrupted file (a node, a
// tensor) reach stderr byte for byte otherwise. Each byte that does not
// belong to a well-formed sequence becomes \xNN.
std::string printable(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size() && !(len == 2 && b < 0xC2) && !(len == 4 && b > 0xF4);
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && len == 3) {  // no overlong forms, no surrogates
      const auto c = static_cast<unsigned char>(s[i + 1]);
      ok = !(b == 0xE0 && c < 0xA0) && !(b == 0xED && c >= 0xA0);
    }
    if (ok && len == 4) {  // no overlong forms, nothing past U+10FFFF
      const auto c = static_cast<unsigned char>(s[i + 1]);
      ok = !(b == 0xF0 && c < 0x90) && !(b == 0xF4 && c >= 0x90);
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += fmt::format("\\x{:02X}", b);
      ++i;
    }
  }
  return out;
}

void print_error(const std::exception& e) { fmt::print(stderr, "error: {}\n", printable(e.what())); }

}  // namespace

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
  pipetrain::cli::add_evaluate_command(app);
  pipetrain::cli::add_generate_command(app);
  pipetrain::cli::add_tokenize_command(app);
  pipetrain::cli::add_zoo_compare_command(*pipetrain::cli::add_zoo_command(app));
  pipetrain::cli::add_profile_command(app);
  pipetrain::cli::add_partition_command(app);
  pipetrain::cli::add_simulate_command(app);
  pipetrain::cli::add_launch_command(app);
  pipetrain::cli::add_doctor_command(app);
  app.set_version_flag("--version", pipetrain::cli::version_text,
                       "Print the version, the commit, the backends and CPU kernels, and exit");
  // An unknown command is an error, not main's help (CLI11 would take
  // `pipetrain evaluate --help` as a help request).
  if (argc > 1 && argv[1][0] != '-') {
    const std::string given = argv[1];
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->check_name(given);
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      fmt::print(stderr, "error: unknown command '{}'; the commands are {} (pipetrain --help)\n",
                 printable(given), names);
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const pipetrain::cli::ExitRequest& e) {
    return e.code;
  } catch (const pipetrain::ModelError& e) {
    print_error(e);
    return 2;
  } catch (const pipetrain::PlanError& e) {
    print_error(e);
    return 2;
  } catch (const std::exception& e) {
    print_error(e);
    return 1;
  }
  return 0;
}
