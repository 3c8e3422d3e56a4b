// A run's checkpoints on disk: written by a background thread from a snapshot
// (training does not wait for the disk), rotated (the newest K kept beside
// the checkpoint path as <stem>.step<N><ext>, the path itself a hard link to
// the newest), and the newest one that verifies found again for a resume.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "importer/checkpoint.h"

namespace pipetrain::importer {

/// "<dir>/<stem>.step<N><ext>" for `path` "<dir>/<stem><ext>".
std::string rotated_checkpoint_path(const std::string& path, int64_t step);

/// Writes checkpoints to `path` on a thread of its own, one at a time. With keep > 1 each goes
/// to rotated_checkpoint_path(path, step) first, `path` then names it too (a hard link, or a
/// second copy where links are refused), and rotated files past the newest `keep` are removed.
class CheckpointWriter {
 public:
  CheckpointWriter(std::string path, int keep);
  /// Waits for the write in flight (its error, if any, is lost: call finish() first).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  /// Waits for the previous write (re-throwing its error), then writes `c` in the background.
  void submit(Checkpoint c, int64_t step);
  /// Waits for the write in flight; re-throws its error (ModelError naming the file).
  void finish();

  int64_t written() const { return written_; }
  double write_seconds() const { return write_seconds_; }  // all writes, in the background

 private:
  void wait_locked(std::unique_lock<std::mutex>& lock);
  void write(const Checkpoint& c, int64_t step);

  std::string path_;
  int keep_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false;
  std::exception_ptr error_;
  std::thread thread_;
  int64_t written_ = 0;
  double write_seconds_ = 0;
};

/// The newest checkpoint that loads and verifies among `path` and its rotated files, with the
/// file it came from; each one passed over (corrupted, truncated) is reported to `warn` with
/// its reason. nullopt when there is none at all; ModelError when none verifies.
struct FoundCheckpoint {
  Checkpoint checkpoint;
  std::string path;
};
std::optional<FoundCheckpoint> latest_checkpoint(
    const std::string& path, const std::function<void(const std::string&)>& warn);

}  // namespace pipetrain::importer
