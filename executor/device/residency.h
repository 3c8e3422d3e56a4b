// Device-resident tensors for the device backends. Within one graph run
// (ForwardRunner brackets it with Backend::begin_run / end_run) a tensor a
// node produced stays in device memory for the nodes that read it: only the
// run's feeds and graph values go up (each once, values cached across runs
// while the run's values_version holds) and only what the host reads comes
// back (the run's outputs, a host op's inputs). The host copy of a tensor
// whose newest bytes are on the device is stale until to_host().
//
// A run's output may also outlive the run on the device (keep()): a stage
// worker's stashed activations, which its backward run reads again, need
// not go down to the host and back up in between.
//
// The bookkeeping is host code shared by the CUDA backend and the portable
// backend, whose "device" is separate host memory and which poisons stale
// host copies (NaN bytes), so the CPU test suite catches a host read that
// skipped to_host().
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "ir/tensor.h"

namespace pipetrain::exec::device {

/// True when the shared implementation of `op` may read input t's values on
/// the host (through DeviceOpArgs::host): axes, shapes, indices, labels and
/// flags (every non-float input), scalars (Clip bounds, Dropout ratios, Pad
/// values) and the losses' inputs (dloss, class weights). Backends bring
/// these to the host before the op runs.
inline bool read_on_host(const std::string& op, const ir::Tensor& t) {
  return t.dtype() != ir::DType::kF32 || t.numel() <= 1 || op.find("Loss") != std::string::npos;
}

/// What residency needs from a device's memory.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p, size_t bytes) = 0;
  /// Host to device; the source may be reused when this returns.
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  /// Device to host, complete when this returns (after the work queued so far).
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  virtual void zero(void* p, size_t bytes) = 0;
  /// Blocks taken from the device so far: the allocations a cache could not serve.
  virtual size_t device_allocations() const = 0;
};

class Residency {
 public:
  /// `poison_stale`: fill the host bytes of tensors whose newest copy is on
  /// the device with 0xFF (NaN floats) until they come back (tests).
  explicit Residency(DeviceMemory& memory, bool poison_stale = false)
      : memory_(memory), poison_(poison_stale) {}
  ~Residency();
  Residency(const Residency&) = delete;
  Residency& operator=(const Residency&) = delete;

  bool active() const { return active_; }
  /// Starts a run; cached values of another values_version are dropped
  /// (values are kept across runs only for a nonzero version).
  void begin_run(uint64_t values_version);
  /// Ends it: every device copy but the cached values is released (the host
  /// must have called to_host() for what it reads).
  void end_run();

  /// The device copy of input t: resident already, or uploaded now. Values
  /// (graph params, constants) stay cached for the run's values_version.
  const void* input(const ir::Tensor& t, bool is_value);
  /// A zeroed device buffer for output t, which now holds t's newest bytes.
  void* output(const ir::Tensor& t);
  /// Brings t's host bytes up to date (a download when the device is newer).
  void to_host(const ir::Tensor& t);
  /// The host wrote t (a host op's output): any device copy is out of date.
  void host_wrote(const ir::Tensor& t);
  /// The run no longer needs t: its device copy goes (a kept one stays).
  void release(const ir::Tensor& t);
  /// t's device copy outlives the run under the returned host tensor, whose
  /// bytes are stale (poisoned in tests) until to_host(): later runs read it
  /// without an upload, until the returned tensor's buffer is freed. t's own
  /// address (an arena slot the next run reuses) no longer names it. A t
  /// whose host bytes are current comes back as a host copy.
  ir::Tensor keep(const ir::Tensor& t);
  /// Device copies held past their runs by keep().
  size_t kept_count() const;

  /// Bytes moved so far, for tests and reports.
  size_t uploaded_bytes() const { return uploaded_; }
  size_t downloaded_bytes() const { return downloaded_; }
  /// Downloads so far: each one waits for the device (a host synchronisation).
  size_t downloads() const { return downloads_; }

 private:
  struct Entry {
    void* device = nullptr;
    size_t bytes = 0;
    bool device_newer = false;  // the host copy is stale
    bool value = false;         // cached across runs (for values_version)
    bool kept = false;          // keep(): held while `owner`'s buffer lives
    std::weak_ptr<std::byte[]> owner;
  };
  using Entries = std::map<const void*, Entry>;
  void drop(Entries::iterator it);
  /// t's entry, or end() (a kept entry whose buffer was freed is dropped:
  /// another tensor may have its address now).
  Entries::iterator find(const ir::Tensor& t);
  static size_t alloc_size(size_t bytes) { return bytes ? bytes : 1; }

  DeviceMemory& memory_;
  const bool poison_;
  bool active_ = false;
  uint64_t values_version_ = 0;
  Entries entries_;  // by host address
  size_t uploaded_ = 0, downloaded_ = 0, downloads_ = 0;
};

}  // namespace pipetrain::exec::device
