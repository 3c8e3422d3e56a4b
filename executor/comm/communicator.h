// How workers move tensors: point-to-point send/recv for activations and
// gradients, and an allreduce among the replicas of a stage. The executor is
// written against this interface only, so threads (local), MPI processes and
// NCCL streams are interchangeable.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace pipetrain::exec {

/// Names one message: which tensor, for which microbatch, in which phase.
/// A receiver asks for an exact tag, so messages may arrive in any order.
struct MessageTag {
  std::string tensor;
  int64_t microbatch = 0;
  int phase = 0;  // kForward, kBackward, kCollective or kTied

  static constexpr int kForward = 0;
  static constexpr int kBackward = 1;
  static constexpr int kCollective = 2;  // a communicator's own traffic (allreduce over messages)
  static constexpr int kTied = 3;        // a tied param's partial gradient (delayed_ties.h)

  auto operator<=>(const MessageTag&) const = default;
  bool operator==(const MessageTag&) const = default;
  /// "fwd 'x' mb 3", for error messages.
  std::string to_string() const;
};

/// No value: wait forever (the default). Otherwise throw RuntimeFault after this long.
using CommTimeout = std::optional<std::chrono::milliseconds>;

/// One worker's endpoint. Calls on one Communicator come from one thread;
/// different ranks' endpoints are used concurrently. After abort() on any
/// rank, every blocked and every later call on every rank throws RuntimeFault
/// carrying the first reason and the rank that aborted.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Queues `t` for rank `dst`; may return before delivery. The tensor is
  /// handed over by handle: the sender must not modify it afterwards (the
  /// receiver owns it). Blocks while the (rank, dst) queue is full.
  void send(int dst, const MessageTag& tag, const ir::Tensor& t, CommTimeout timeout = {}) {
    do_send(dst, tag, t, timeout);
  }
  /// Blocks until the message from `src` with exactly `tag` arrives; messages
  /// with other tags stay queued for later recv calls.
  ir::Tensor recv(int src, const MessageTag& tag, CommTimeout timeout = {}) {
    return do_recv(src, tag, timeout);
  }
  /// Whether the message from `src` with exactly `tag` is here, so that recv would not
  /// wait. A communicator that cannot tell says false.
  virtual bool has_message(int src, const MessageTag& tag) {
    (void)src, (void)tag;
    return false;
  }
  /// Sums `tensors` element-wise over the ranks of `group` (which must
  /// contain rank()), in place. Every member passes the same count, dtypes and
  /// shapes. The sum runs in ascending rank order, so every member gets
  /// bitwise the same result.
  void allreduce_sum(const std::vector<int>& group, std::vector<ir::Tensor*> tensors,
                     CommTimeout timeout = {}) {
    do_allreduce_sum(group, std::move(tensors), timeout);
  }
  /// Stops every rank: wakes all blocked calls with RuntimeFault. The first
  /// reason wins. Never throws.
  virtual void abort(const std::string& why) noexcept = 0;
  /// Whether this rank prints the job's errors (one message per job, not one
  /// per rank): rank 0, unless the communicator knows rank 0 is gone.
  virtual bool speaks_for_job() const { return rank() == 0; }

 protected:
  virtual void do_send(int dst, const MessageTag& tag, const ir::Tensor& t,
                       CommTimeout timeout) = 0;
  virtual ir::Tensor do_recv(int src, const MessageTag& tag, CommTimeout timeout) = 0;
  virtual void do_allreduce_sum(const std::vector<int>& group, std::vector<ir::Tensor*> tensors,
                                CommTimeout timeout) = 0;
};

}  // namespace pipetrain::exec
