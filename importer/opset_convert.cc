// Opsets below 11 are brought to 11 by libonnx's version converter. Its
// adapters and the shape rules of old op versions index dimensions without
// checking ranks (fuzzing found segfaults in Gemm-6's shape inference and in
// the Gemm 6->7 adapter), so a malformed legacy model could crash the whole
// process. The conversion therefore runs in a forked child process: the parent
// gets the converted model back through a pipe, or a ModelError when the
// child failed, crashed or hung. Only legacy models pay for the fork.
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "importer/internal.h"
#include "ir/error.h"

// Sanitizer runtimes define this; in a normal build the weak symbol is null.
extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

namespace pipetrain::importer::detail {

namespace {

constexpr int kTimeoutMs = 300 * 1000;  // conversion of a sane model takes well under a second

bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// The child: strict shape inference (the adapters rely on the shapes it
// guarantees), then conversion. Replies "K<model bytes>" or "E<message>".
[[noreturn]] void convert_in_child(int fd, const onnx::ModelProto& model, int64_t to) {
  // A crash here must end this process quietly, not run a fuzzer's or a
  // sanitizer's crash reporting as if the parent had crashed.
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) std::signal(sig, SIG_DFL);
  std::string reply;
  try {
    onnx::ModelProto m = model;
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(false, 1, false));
    onnx::ModelProto converted = onnx::version_conversion::ConvertVersion(m, static_cast<int>(to));
    reply = "K";
    reply += converted.SerializeAsString();
  } catch (const std::exception& e) {
    reply = "E";
    reply += e.what();
  } catch (...) {
    reply = "Eunknown error";
  }
  _exit(write_all(fd, reply) ? 0 : 1);
}

}  // namespace

onnx::ModelProto convert_opset(const onnx::ModelProto& model, int64_t from, int64_t to) {
  const std::string failed =
      "opset " + std::to_string(from) + " could not be converted to opset " + std::to_string(to);
  int fds[2];
  if (::pipe(fds) != 0) throw ModelError(failed + ": cannot create a pipe");
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw ModelError(failed + ": cannot fork");
  }
  if (pid == 0) {
    ::close(fds[0]);
    convert_in_child(fds[1], model, to);
  }
  ::close(fds[1]);
  std::string reply;
  bool timed_out = false;
  char buf[1 << 16];
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    int ready = ::poll(&p, 1, kTimeoutMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = true;
      break;
    }
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) throw ModelError(failed + ": libonnx's converter did not finish");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply.empty())
    throw ModelError(failed + ": libonnx's converter crashed on it (the model is malformed)");
  if (reply[0] == 'E') throw ModelError(failed + ": " + reply.substr(1));
  onnx::ModelProto converted;
  if (!converted.ParseFromArray(reply.data() + 1, static_cast<int>(reply.size() - 1)))
    throw ModelError(failed + ": the converted model does not parse");
  return converted;
}

}  // namespace pipetrain::importer::detail
