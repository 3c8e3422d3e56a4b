#include "cli/supervisor.h"

#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "ir/error.h"

namespace pipetrain::cli {

namespace {

constexpr const char* kHeartbeatEnv = "PIPETRAIN_HEARTBEAT";
std::atomic<pid_t> g_child{0};
std::atomic<int> g_stop_signal{0};
std::atomic<int> g_forward_as{0};  // the signal the child gets for a stop (0: the one received)

// The stop goes to the command's process group, except for mpirun: it alone
// gets SIGUSR1 and forwards it to each rank once (a rank that got it twice
// would take the second as "exit now").
void send_stop(pid_t child, int sig) {
  const int as = g_forward_as.load();
  if (as)
    ::kill(child, as);
  else
    ::kill(-child, sig);
}

extern "C" void forward_stop(int sig) {
  int expected = 0;
  g_stop_signal.compare_exchange_strong(expected, sig);
  const pid_t child = g_child.load();
  if (child > 0) send_stop(child, sig);
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return std::string("killed by SIG") + (name ? name : std::to_string(sig).c_str());
  }
  return "status " + std::to_string(status);
}

bool is_mpi_launcher(const std::string& program) {
  const std::string base = std::filesystem::path(program).filename().string();
  return base == "mpirun" || base == "mpiexec" || base == "orterun";
}

// Seconds since `path` was last touched (since `start` when it never was).
double seconds_quiet(const std::string& path, std::filesystem::file_time_type start) {
  std::error_code ec;
  auto last = std::filesystem::last_write_time(path, ec);
  if (ec || last < start) last = start;
  return std::chrono::duration<double>(std::filesystem::file_time_type::clock::now() - last)
      .count();
}

// fork + exec in a new process group (terminal signals reach the supervisor
// alone, which forwards them once); the child's wait status. With a hang
// timeout, a job whose heartbeat file stays untouched that long is killed
// (mpirun first by SIGTERM, so that it takes its ranks down), and `hung` set.
int run_once(const std::vector<std::string>& command, double hang_timeout,
             const std::string& heartbeat, bool* hung) {
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const auto start = std::filesystem::file_time_type::clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw RuntimeFault(std::string("launch: cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::execvp(argv[0], argv.data());
    fmt::print(stderr, "launch: cannot run {}: {}\n", command[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with a signal before the child's own call
  g_child = pid;
  if (const int sig = g_stop_signal.load()) send_stop(pid, sig);
  int status = 0;
  *hung = false;
  double killed_at = -1;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, hang_timeout > 0 ? WNOHANG : 0);
    if (r == pid) break;
    if (r < 0 && errno != EINTR)
      throw RuntimeFault(std::string("launch: waitpid: ") + std::strerror(errno));
    if (hang_timeout <= 0) continue;
    const double quiet = seconds_quiet(heartbeat, start);
    if (!*hung && quiet > hang_timeout) {
      *hung = true;
      killed_at = quiet;
      ::kill(g_forward_as.load() ? pid : -pid, g_forward_as.load() ? SIGTERM : SIGKILL);
    } else if (*hung && quiet > killed_at + 10) {
      ::kill(-pid, SIGKILL);  // mpirun did not end its job in 10 s
      ::kill(pid, SIGKILL);
    }
    ::usleep(100000);
  }
  g_child = 0;
  return status;
}

}  // namespace

std::vector<std::string> resume_latest(std::vector<std::string> command) {
  for (size_t i = 0; i < command.size(); ++i) {
    if (command[i] == "--resume" && i + 1 < command.size()) {
      command[i + 1] = "latest";
      return command;
    }
    if (command[i].rfind("--resume=", 0) == 0) {
      command[i] = "--resume=latest";
      return command;
    }
  }
  command.push_back("--resume");
  command.push_back("latest");
  return command;
}

void touch_heartbeat() {
  static const char* path = std::getenv(kHeartbeatEnv);
  if (!path) return;
  const int fd = ::open(path, O_WRONLY | O_CREAT, 0600);
  if (fd >= 0) {
    ::futimens(fd, nullptr);
    ::close(fd);
  }
}

std::optional<int> supervise_self(int max_restarts, double hang_timeout_s) {
  constexpr const char* kMarker = "PIPETRAIN_SUPERVISED";
  if (max_restarts <= 0 || std::getenv(kMarker)) return std::nullopt;
  std::vector<std::string> command;
  const auto& argv = command_line();
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--max-restarts") {
      ++i;  // and its value
      continue;
    }
    if (argv[i].rfind("--max-restarts=", 0) == 0) continue;
    if (argv[i] == "--hang-timeout") {
      ++i;
      continue;
    }
    if (argv[i].rfind("--hang-timeout=", 0) == 0) continue;
    command.push_back(argv[i]);
  }
  command[0] = std::filesystem::read_symlink("/proc/self/exe").string();
  ::setenv(kMarker, "1", 1);  // the child trains; its restarts are ours
  SupervisorOptions o;
  o.max_restarts = max_restarts;
  o.hang_timeout_s = hang_timeout_s;
  return run_supervised(command, o);
}

int run_supervised(const std::vector<std::string>& command, const SupervisorOptions& options) {
  if (command.empty()) throw ModelError("launch: no command to run (give it after --)");
  std::ofstream log;
  if (!options.log_path.empty()) {
    log.open(options.log_path, std::ios::app);
    if (!log) throw ModelError("launch: cannot write the log " + options.log_path);
  }
  auto say = [&](const std::string& line) {
    fmt::print(stderr, "launch: {}\n", line);
    if (log)
      log << fmt::format("{:%Y-%m-%d %H:%M:%S} {}\n", fmt::localtime(std::time(nullptr)), line)
          << std::flush;
  };
  g_forward_as = is_mpi_launcher(command[0]) ? SIGUSR1 : 0;
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = forward_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  struct Restore {
    struct sigaction i, t;
    ~Restore() {
      sigaction(SIGINT, &i, nullptr);
      sigaction(SIGTERM, &t, nullptr);
    }
  } restore{old_int, old_term};

  // With a watchdog, the job touches this file at every round boundary (train, rank 0).
  const std::string heartbeat = (std::filesystem::temp_directory_path() /
                                 ("pipetrain-heartbeat-" + std::to_string(::getpid())))
                                    .string();
  if (options.hang_timeout_s > 0) ::setenv(kHeartbeatEnv, heartbeat.c_str(), 1);
  struct RemoveHeartbeat {
    const std::string& path;
    ~RemoveHeartbeat() { ::unlink(path.c_str()); }
  } remove_heartbeat{heartbeat};
  std::vector<std::string> cmd = command;
  for (int attempt = 0;; ++attempt) {
    const auto start = std::chrono::steady_clock::now();
    bool hung = false;
    const int status = run_once(cmd, options.hang_timeout_s, heartbeat, &hung);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code == 0) {
      if (attempt > 0)
        say(fmt::format("finished after {} restart{}", attempt, attempt > 1 ? "s" : ""));
      return 0;
    }
    if (g_stop_signal.load()) {
      say(fmt::format("stopped by {} ({}); not restarting", sigabbrev_np(g_stop_signal.load()),
                      describe(status)));
      return code;
    }
    if (WIFEXITED(status) && (code == 2 || code == 127)) {
      say(fmt::format("{}: the command itself is wrong (bad input); not restarting",
                      describe(status)));
      return code;
    }
    if (attempt >= options.max_restarts) {
      say(fmt::format("{} after {:.1f} s, and all {} restart{} are spent; giving up",
                      hung ? std::string("no progress (hung or stopped)") : describe(status),
                      seconds, options.max_restarts, options.max_restarts == 1 ? "" : "s"));
      return code;
    }
    const std::string cause = hung ? fmt::format("no progress for {:g} s (hung or stopped), killed",
                                                 options.hang_timeout_s)
                                   : describe(status);
    say(fmt::format("{} after {:.1f} s; restart {} of {} from the newest valid checkpoint", cause,
                    seconds, attempt + 1, options.max_restarts));
    cmd = resume_latest(command);
  }
}

}  // namespace pipetrain::cli
