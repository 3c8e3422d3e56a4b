#include "cli/output_paths.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ir/error.h"

namespace pipetrain::cli {

namespace fs = std::filesystem;

namespace {

// Creates and removes a file in `dir`; the errno text when that fails.
std::string probe(const fs::path& dir) {
  const fs::path p = dir / (".pipetrain-probe-" + std::to_string(::getpid()));
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(p.c_str());
  return "";
}

}  // namespace

void check_output_file(const std::string& option, const std::string& path) {
  const std::string what = option + " " + path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw ModelError(what + ": is a directory, not a file");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::exists(dir, ec))
    throw ModelError(what + ": directory '" + dir.string() + "' does not exist");
  if (!fs::is_directory(dir, ec))
    throw ModelError(what + ": '" + dir.string() + "' is not a directory");
  if (const std::string why = probe(dir); !why.empty())
    throw ModelError(what + ": cannot create files in '" + dir.string() + "' (" + why + ")");
}

void check_output_dir(const std::string& option, const std::string& dir) {
  const std::string what = option + " " + dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ModelError(what + ": cannot create the directory (" + ec.message() + ")");
  if (!fs::is_directory(dir, ec)) throw ModelError(what + ": is a file, not a directory");
  if (const std::string why = probe(dir); !why.empty())
    throw ModelError(what + ": cannot create files there (" + why + ")");
}

void check_train_outputs(const TrainArgs& a) {
  check_output_dir("--run-dir", a.run_dir);
  if (!a.output.empty()) check_output_file("-o", a.output);
  if (a.pipelined())
    check_output_file("--checkpoint",
                      a.checkpoint.empty() ? a.run_dir + "/checkpoint.onnx" : a.checkpoint);
}

}  // namespace pipetrain::cli
