// Local communicator: one mutex guards all mailboxes and collectives (the
// critical sections only move handles; allreduce sums outside the lock).
// Receivers wait on their own condition variable, blocked senders on theirs,
// so a delivery wakes only the thread that can use it.

#include "executor/comm/local_communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "executor/comm/comm_checks.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

using Clock = std::chrono::steady_clock;

// Messages from one rank to another, keyed by tag (FIFO for a repeated tag).
struct Mailbox {
  std::map<MessageTag, std::deque<ir::Tensor>> messages;
  size_t bytes = 0;  // in flight: sent, not yet received
};

// One allreduce round of a group: members deposit, the last one sums, each
// copies the result back, the last to copy resets the round.
struct Collective {
  enum class Phase { kGathering, kSumming, kScattering };
  Phase phase = Phase::kGathering;
  std::map<int, std::vector<ir::Tensor*>> inputs;  // rank -> its tensors
  std::vector<ir::Tensor> result;
  size_t taken = 0;
};

struct SharedState {
  SharedState(int size, size_t bound)
      : size(size),
        bound(bound),
        mailboxes(static_cast<size_t>(size) * size),
        recv_cv(size),
        send_cv(size),
        closed(size, false) {}

  const int size;
  const size_t bound;
  std::chrono::microseconds spin{0};  // recv polls this long before sleeping
  std::mutex mu;
  std::vector<Mailbox> mailboxes;                // (src, dst) at src * size + dst
  std::vector<std::condition_variable> recv_cv;  // per receiving rank
  std::vector<std::condition_variable> send_cv;  // per sending rank
  std::condition_variable collective_cv;
  std::map<std::vector<int>, Collective> collectives;
  std::vector<bool> closed;  // endpoint destroyed
  bool aborted = false;
  std::string abort_message;

  Mailbox& mailbox(int src, int dst) { return mailboxes[static_cast<size_t>(src) * size + dst]; }

  void wake_all() {
    for (auto& cv : recv_cv) cv.notify_all();
    for (auto& cv : send_cv) cv.notify_all();
    collective_cv.notify_all();
  }

  // Caller holds mu.
  void abort_locked(int rank, const std::string& why) {
    if (aborted) return;
    aborted = true;
    abort_message = "communicator aborted by rank " + std::to_string(rank) + ": " + why;
    wake_all();
  }

  void throw_if_aborted() const {
    if (aborted) throw RuntimeFault(abort_message);
  }

  // Waits on cv until done() or abort; returns false on timeout. Caller holds lock.
  template <typename Done>
  bool wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, CommTimeout timeout,
            Done done) {
    auto ready = [&] { return aborted || done(); };
    if (!timeout) {
      cv.wait(lock, ready);
      return true;
    }
    return cv.wait_until(lock, Clock::now() + *timeout, ready);
  }
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<SharedState> state, int rank)
      : state_(std::move(state)), rank_(rank) {}

  ~LocalCommunicator() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->closed[rank_] = true;
    state_->wake_all();
  }

  int rank() const override { return rank_; }
  int size() const override { return state_->size; }

  void abort(const std::string& why) noexcept override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->abort_locked(rank_, why);
  }

 protected:
  void do_send(int dst, const MessageTag& tag, const ir::Tensor& t, CommTimeout timeout) override {
    check_peer(dst, "send to");
    SharedState& s = *state_;
    std::unique_lock<std::mutex> lock(s.mu);
    s.throw_if_aborted();
    Mailbox& box = s.mailbox(rank_, dst);
    const size_t bytes = t.nbytes();
    // An oversize message still goes through an empty mailbox, else it could never be sent.
    bool ok = s.wait(lock, s.send_cv[rank_], timeout, [&] {
      return s.closed[dst] || box.bytes == 0 || box.bytes + bytes <= s.bound;
    });
    s.throw_if_aborted();
    if (!ok) throw timed_out("send to", dst, tag, timeout);
    if (s.closed[dst]) throw gone("send to", dst, tag);
    box.messages[tag].push_back(t);
    box.bytes += bytes;
    s.recv_cv[dst].notify_all();
  }

  bool has_message(int src, const MessageTag& tag) override {
    check_peer(src, "look for a message from");
    SharedState& s = *state_;
    std::lock_guard<std::mutex> lock(s.mu);
    return s.mailbox(src, rank_).messages.count(tag) > 0;
  }

  ir::Tensor do_recv(int src, const MessageTag& tag, CommTimeout timeout) override {
    check_peer(src, "recv from");
    SharedState& s = *state_;
    std::unique_lock<std::mutex> lock(s.mu);
    s.throw_if_aborted();
    Mailbox& box = s.mailbox(src, rank_);
    auto it = box.messages.end();
    if (s.spin.count() > 0) {
      // Poll first: a thread that sleeps on a VM's idle vCPU wakes up slowly.
      const auto until = Clock::now() + s.spin;
      while (box.messages.find(tag) == box.messages.end() && !s.aborted && !s.closed[src] &&
             Clock::now() < until) {
        lock.unlock();
        for (int k = 0; k < 64; ++k) std::this_thread::yield();
        lock.lock();
      }
    }
    bool ok = s.wait(lock, s.recv_cv[rank_], timeout, [&] {
      it = box.messages.find(tag);
      return it != box.messages.end() || s.closed[src];
    });
    s.throw_if_aborted();
    if (!ok) throw timed_out("recv from", src, tag, timeout);
    if (it == box.messages.end()) throw gone("recv from", src, tag);
    ir::Tensor t = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) box.messages.erase(it);
    box.bytes -= t.nbytes();
    s.send_cv[src].notify_all();
    return t;
  }

  void do_allreduce_sum(const std::vector<int>& group, std::vector<ir::Tensor*> tensors,
                        CommTimeout timeout) override {
    check_group(group, tensors);
    std::vector<int> members = group;
    std::sort(members.begin(), members.end());
    SharedState& s = *state_;
    std::unique_lock<std::mutex> lock(s.mu);
    s.throw_if_aborted();
    Collective& c = s.collectives[members];
    const auto deadline = timeout ? Clock::now() + *timeout : Clock::time_point::max();
    auto wait_for = [&](auto done) {
      auto ready = [&] { return s.aborted || done(); };
      if (!timeout) {
        s.collective_cv.wait(lock, ready);
        return true;
      }
      return s.collective_cv.wait_until(lock, deadline, ready);
    };

    // A fast member may arrive while the previous round still scatters.
    bool ok = wait_for([&] { return c.phase == Collective::Phase::kGathering; });
    s.throw_if_aborted();
    if (!ok) throw collective_timeout(members, c, timeout);
    if (!c.inputs.empty()) check_matches(c.inputs.begin()->second, tensors, members);
    c.inputs[rank_] = tensors;

    if (c.inputs.size() == members.size()) {
      // Last to arrive sums outside the lock; the others wait (their tensors stay alive).
      c.phase = Collective::Phase::kSumming;
      lock.unlock();
      std::vector<ir::Tensor> result;
      for (size_t i = 0; i < tensors.size(); ++i) {
        ir::Tensor sum = c.inputs.at(members[0])[i]->clone();
        for (size_t m = 1; m < members.size(); ++m) accumulate(sum, *c.inputs.at(members[m])[i]);
        result.push_back(std::move(sum));
      }
      lock.lock();
      c.result = std::move(result);
      c.phase = Collective::Phase::kScattering;
      s.collective_cv.notify_all();
    } else {
      // Leaving on abort or timeout is only safe before the sum reads our tensors.
      auto ready = [&] {
        return c.phase == Collective::Phase::kScattering ||
               (s.aborted && c.phase == Collective::Phase::kGathering);
      };
      ok = timeout ? s.collective_cv.wait_until(lock, deadline, ready)
                   : (s.collective_cv.wait(lock, ready), true);
      if (!ok && c.phase == Collective::Phase::kSumming) {
        s.collective_cv.wait(lock, [&] { return c.phase == Collective::Phase::kScattering; });
      }
      if (c.phase == Collective::Phase::kGathering) {
        c.inputs.erase(rank_);
        s.throw_if_aborted();
        throw collective_timeout(members, c, timeout);
      }
    }

    // Scatter: the result is immutable until every member has copied it.
    lock.unlock();
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::memcpy(tensors[i]->raw(), c.result[i].raw(), c.result[i].nbytes());
    }
    lock.lock();
    if (++c.taken == members.size()) {
      c.inputs.clear();
      c.result.clear();
      c.taken = 0;
      c.phase = Collective::Phase::kGathering;
      s.collective_cv.notify_all();
    }
  }

 private:
  void check_peer(int peer, const char* what) const {
    check_comm_peer(rank_, state_->size, peer, what);
  }

  void check_group(const std::vector<int>& group, const std::vector<ir::Tensor*>& tensors) const {
    check_comm_group(rank_, state_->size, group, tensors);
  }

  // Another member's tensors must line up with ours; a mismatch is a bug in
  // the plan, so stop every rank rather than leave the others waiting.
  void check_matches(const std::vector<ir::Tensor*>& theirs, const std::vector<ir::Tensor*>& ours,
                     const std::vector<int>& members) {
    bool same = theirs.size() == ours.size();
    for (size_t i = 0; same && i < ours.size(); ++i) {
      same = theirs[i]->dtype() == ours[i]->dtype() && theirs[i]->shape() == ours[i]->shape();
    }
    if (!same) {
      state_->abort_locked(rank_, "allreduce over " + describe_group(members) +
                                      ": tensors differ in count, dtype or shape between ranks");
      state_->throw_if_aborted();
    }
  }

  RuntimeFault timed_out(const char* what, int peer, const MessageTag& tag,
                         CommTimeout timeout) const {
    return comm_timed_out(rank_, what, peer, tag, timeout);
  }

  RuntimeFault gone(const char* what, int peer, const MessageTag& tag) const {
    return RuntimeFault("rank " + std::to_string(rank_) + ": " + what + " rank " +
                        std::to_string(peer) + " for " + tag.to_string() +
                        ", but that rank's communicator was destroyed");
  }

  RuntimeFault collective_timeout(const std::vector<int>& members, const Collective& c,
                                  CommTimeout timeout) const {
    std::vector<int> missing;
    for (int m : members) {
      if (m != rank_ && !c.inputs.count(m)) missing.push_back(m);
    }
    return RuntimeFault("rank " + std::to_string(rank_) + ": allreduce over " +
                        describe_group(members) + " timed out after " +
                        std::to_string(timeout ? timeout->count() : 0) + " ms waiting for ranks " +
                        describe_group(missing));
  }

  std::shared_ptr<SharedState> state_;
  const int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_communicators(
    int size, size_t queue_bytes_bound, std::chrono::microseconds spin) {
  if (size < 1) {
    throw PlanError("local communicator needs at least 1 rank, got " + std::to_string(size));
  }
  auto state = std::make_shared<SharedState>(size, queue_bytes_bound);
  state->spin = spin;
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(std::make_unique<LocalCommunicator>(state, r));
  return comms;
}

}  // namespace pipetrain::exec
