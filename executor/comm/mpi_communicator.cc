// The MPI communicator. Every MPI call happens on one progress thread (the
// thread that initialised MPI, so MPI_THREAD_FUNNELED suffices); worker
// threads only queue sends and wait for their messages to be filed, like
// the local communicator's mailboxes.
#include "executor/comm/mpi_communicator.h"

#include <cstdlib>
#include <string>

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "executor/comm/comm_checks.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTagHeader = 1;     // a message's tag, dtype and shape
constexpr int kTagPayload = 2;    // its bytes, right behind the header (same source, in order)
constexpr int kTagAbort = 3;      // the abort reason, to every rank
constexpr int kTagAbortLost = 6;  // the same, when a rank went silent (MPI_Finalize would hang)
constexpr int kTagBeat = 4;       // "still here", every kBeatEvery to every peer
constexpr int kTagBye = 5;        // "closing cleanly": stop watching me

constexpr auto kPollIdle = std::chrono::microseconds(500);
constexpr auto kPollWhileWaiting = std::chrono::microseconds(20);
constexpr auto kBeatEvery = std::chrono::milliseconds(500);
// How long teardown waits for queued sends (after an abort: a peer may be
// gone), then for MPI_Finalize; short enough that a job whose rank died or
// hung ends within 10 seconds of the peer timeout's default.
constexpr auto kDrainLimit = std::chrono::seconds(3);
constexpr auto kAbortedDrainLimit = std::chrono::milliseconds(500);
constexpr auto kFinalizeLimit = std::chrono::seconds(2);
// How long a rank that does not speak for the job waits after an aborted
// job's MPI_Finalize before it exits (finalize()).
constexpr auto kQuietExitDelay = std::chrono::seconds(2);

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

// Header: phase, microbatch, dtype, rank, dims..., then the tensor name.
std::vector<char> pack_header(const MessageTag& tag, const ir::Tensor& t) {
  std::vector<int64_t> words = {tag.phase, tag.microbatch, static_cast<int64_t>(t.dtype()),
                                static_cast<int64_t>(t.shape().size())};
  for (int64_t d : t.shape()) words.push_back(d);
  std::vector<char> bytes(words.size() * sizeof(int64_t) + tag.tensor.size());
  std::memcpy(bytes.data(), words.data(), words.size() * sizeof(int64_t));
  std::memcpy(bytes.data() + words.size() * sizeof(int64_t), tag.tensor.data(), tag.tensor.size());
  return bytes;
}

// The inverse of pack_header; false for bytes it did not write.
bool unpack_header(const std::vector<char>& bytes, MessageTag& tag, ir::DType& dtype,
                   ir::Shape& shape) {
  auto word = [&](size_t i) {
    int64_t w = 0;
    std::memcpy(&w, bytes.data() + i * sizeof(int64_t), sizeof(int64_t));
    return w;
  };
  if (bytes.size() < 4 * sizeof(int64_t)) return false;
  const int64_t rank = word(3);
  if (rank < 0 || bytes.size() < static_cast<size_t>(4 + rank) * sizeof(int64_t)) return false;
  tag.phase = static_cast<int>(word(0));
  tag.microbatch = word(1);
  dtype = static_cast<ir::DType>(word(2));
  shape.clear();
  for (int64_t i = 0; i < rank; ++i) shape.push_back(word(static_cast<size_t>(4 + i)));
  const size_t name_at = static_cast<size_t>(4 + rank) * sizeof(int64_t);
  tag.tensor.assign(bytes.data() + name_at, bytes.size() - name_at);
  return ir::dtype_size(dtype) > 0;
}

// A send the worker queued; the progress thread posts it.
struct Outgoing {
  int dst = 0;
  std::vector<char> header;  // or the abort text
  ir::Tensor payload;        // kept alive until MPI is done with it
  bool abort = false;
  bool lost = false;  // an abort because a rank went silent
};

struct Posted {
  Outgoing message;
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

// A message whose header arrived and whose payload is being received.
struct Arriving {
  MessageTag tag;
  ir::Tensor tensor;
  MPI_Request request = MPI_REQUEST_NULL;
};

std::atomic<bool> g_mpi_used{false};  // MPI can be initialised once per process

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(size_t bound, std::chrono::milliseconds peer_timeout)
      : bound_(bound), peer_timeout_(peer_timeout) {
    if (g_mpi_used.exchange(true))
      throw RuntimeFault("MPI was already initialised in this process (one mpi communicator each)");
    progress_ = std::thread([this] { progress_main(); });
    std::unique_lock<std::mutex> lock(mu_);
    recv_cv_.wait(lock, [&] { return started_; });
    if (!init_error_.empty()) {
      lock.unlock();
      progress_.join();
      throw RuntimeFault(init_error_);
    }
  }

  ~MpiCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      wake_.notify_all();
    }
    progress_.join();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // Rank 0, or, once rank 0 has gone silent, the lowest rank that has not.
  bool speaks_for_job() const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (Clock::now() < muted_until_) return false;
    if (rank_ == 0) return true;
    // Half the timeout: whoever noticed first may already have stopped us.
    const auto quiet = peer_timeout_ / 2;
    for (int r = 0; r < rank_; ++r)
      if (!silent_locked(r, Clock::now(), quiet)) return false;
    return peer_timeout_.count() > 0;
  }

  void abort(const std::string& why) noexcept override {
    try {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) return;
      set_aborted_locked("communicator aborted by rank " + std::to_string(rank_) + ": " + why);
      for (int r = 0; r < size_; ++r)
        if (r != rank_)
          outgoing_.push_back(
              {r, {abort_message_.begin(), abort_message_.end()}, {}, true, lost_peer_});
      wake_.notify_all();
    } catch (...) {  // out of memory: the local flag is what matters
    }
  }

 protected:
  void do_send(int dst, const MessageTag& tag, const ir::Tensor& t, CommTimeout timeout) override {
    check_comm_peer(rank_, size_, dst, "send to");
    std::unique_lock<std::mutex> lock(mu_);
    throw_if_aborted();
    if (dst == rank_) {  // to ourselves: straight into the mailbox
      mailbox_[{dst, tag}].push_back(t);
      recv_cv_.notify_all();
      return;
    }
    const size_t bytes = t.nbytes();
    size_t& pending = pending_bytes_[static_cast<size_t>(dst)];
    const auto deadline = timeout ? Clock::now() + *timeout : Clock::time_point::max();
    // An oversize message still goes when nothing else is queued, else it never could.
    while (!aborted_ && pending != 0 && pending + bytes > bound_) {
      if (send_cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
          Clock::now() >= deadline)
        throw comm_timed_out(rank_, "send to", dst, tag, timeout);
    }
    throw_if_aborted();
    pending += bytes;
    outgoing_.push_back({dst, pack_header(tag, t), t, false});
    wake_.notify_all();
  }

  bool has_message(int src, const MessageTag& tag) override {
    check_comm_peer(rank_, size_, src, "look for a message from");
    std::lock_guard<std::mutex> lock(mu_);
    return mailbox_.count(std::make_pair(src, tag)) > 0;
  }

  ir::Tensor do_recv(int src, const MessageTag& tag, CommTimeout timeout) override {
    check_comm_peer(rank_, size_, src, "recv from");
    std::unique_lock<std::mutex> lock(mu_);
    const auto key = std::make_pair(src, tag);
    auto ready = [&] { return aborted_ || mailbox_.count(key) > 0; };
    ++waiting_;
    bool arrived = true;
    if (!timeout)
      recv_cv_.wait(lock, ready);
    else
      arrived = recv_cv_.wait_for(lock, *timeout, ready);
    --waiting_;
    if (!arrived) throw comm_timed_out(rank_, "recv from", src, tag, timeout);
    throw_if_aborted();
    auto it = mailbox_.find(key);
    ir::Tensor t = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) mailbox_.erase(it);
    return t;
  }

  // Gather to the lowest member, sum in ascending rank order, send the sum back.
  void do_allreduce_sum(const std::vector<int>& group, std::vector<ir::Tensor*> tensors,
                        CommTimeout timeout) override {
    check_comm_group(rank_, size_, group, tensors);
    std::vector<int> members = group;
    std::sort(members.begin(), members.end());
    if (members.size() == 1) return;
    const int64_t seq = collective_seq_[members]++;
    auto tag = [&](size_t i, const char* what) {
      return MessageTag{std::string("allreduce/") + what + "/" + std::to_string(i), seq,
                        MessageTag::kCollective};
    };
    const int root = members.front();
    if (rank_ != root) {
      for (size_t i = 0; i < tensors.size(); ++i)
        send(root, tag(i, "in"), tensors[i]->clone(), timeout);  // ours is overwritten below
      for (size_t i = 0; i < tensors.size(); ++i) {
        ir::Tensor sum = recv(root, tag(i, "sum"), timeout);
        if (sum.dtype() != tensors[i]->dtype() || sum.shape() != tensors[i]->shape())
          fail("allreduce over " + describe_group(members) + ": the sum of tensor " +
               std::to_string(i) + " came back with another dtype or shape");
        std::memcpy(tensors[i]->raw(), sum.raw(), sum.nbytes());
      }
      return;
    }
    std::vector<ir::Tensor> sums;
    for (ir::Tensor* t : tensors) sums.push_back(t->clone());
    for (size_t m = 1; m < members.size(); ++m)
      for (size_t i = 0; i < tensors.size(); ++i) {
        ir::Tensor theirs = recv(members[m], tag(i, "in"), timeout);
        if (theirs.dtype() != sums[i].dtype() || theirs.shape() != sums[i].shape())
          fail("allreduce over " + describe_group(members) + ": tensor " + std::to_string(i) +
               " differs in dtype or shape between rank " + std::to_string(root) + " and rank " +
               std::to_string(members[m]));
        accumulate(sums[i], theirs);
      }
    for (size_t m = 1; m < members.size(); ++m)
      for (size_t i = 0; i < tensors.size(); ++i) send(members[m], tag(i, "sum"), sums[i], timeout);
    for (size_t i = 0; i < tensors.size(); ++i)
      std::memcpy(tensors[i]->raw(), sums[i].raw(), sums[i].nbytes());
  }

 private:
  // A mismatch is a bug in the plan: stop every rank rather than leave them waiting.
  [[noreturn]] void fail(const std::string& why) {
    abort(why);
    std::lock_guard<std::mutex> lock(mu_);
    throw RuntimeFault(abort_message_);
  }

  void throw_if_aborted() const {
    if (aborted_) throw RuntimeFault(abort_message_);
  }

  void set_aborted_locked(std::string message) {
    aborted_ = true;
    abort_message_ = std::move(message);
    recv_cv_.notify_all();
    send_cv_.notify_all();
  }

  void progress_main() {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (rc != MPI_SUCCESS) {
        init_error_ = "MPI_Init_thread failed: " + mpi_error(rc);
      } else {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
        pending_bytes_.assign(static_cast<size_t>(size_), 0);
        last_heard_.assign(static_cast<size_t>(size_), Clock::now());
        said_bye_.assign(static_cast<size_t>(size_), false);
      }
      started_ = true;
      recv_cv_.notify_all();
    }
    if (rc != MPI_SUCCESS) return;
    loop();
    finalize();
  }

  void loop() {
    std::vector<Posted> posted;
    std::map<int, std::deque<Arriving>> arriving;  // per source, in arrival order
    std::optional<Clock::time_point> drain_until;
    Beats beats(static_cast<size_t>(size_));
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_watch_ = Clock::now();  // MPI_Init's time is no pause
    }
    auto idle = std::chrono::microseconds(0);
    for (;;) {
      check_own_pause();
      bool busy = false, stopping = false;
      std::deque<Outgoing> fresh;
      {
        std::lock_guard<std::mutex> lock(mu_);
        fresh.swap(outgoing_);
        stopping = stop_;
      }
      for (auto& o : fresh) {
        busy = true;
        posted.push_back(post(std::move(o)));
      }
      busy |= complete_sends(posted);
      busy |= receive_headers(arriving);
      busy |= complete_receives(arriving);
      busy |= receive_aborts();
      busy |= receive_beats();
      send_beats(beats, stopping);
      watch_peers();
      if (stopping) {
        std::lock_guard<std::mutex> lock(mu_);
        if (posted.empty() && outgoing_.empty()) {
          say_bye(beats);
          return;
        }
        if (!drain_until)
          drain_until = Clock::now() + (aborted_ ? kAbortedDrainLimit : kDrainLimit);
        if (Clock::now() > *drain_until) return;  // a peer is gone: finalize anyway
      }
      if (busy) {
        idle = std::chrono::microseconds(0);
        continue;
      }
      // Back off while nothing moves; a queued send wakes us at once.
      // While a worker waits for a message, poll often: its arrival is the
      // critical path (a message's latency); otherwise back off further.
      const auto cap = waiting_ > 0 ? kPollWhileWaiting : kPollIdle;
      idle = std::min(std::max(idle * 2, std::chrono::microseconds(10)), cap);
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, idle, [&] { return !outgoing_.empty() || stop_; });
    }
  }

  Posted post(Outgoing o) {
    Posted p;
    p.message = std::move(o);
    Outgoing& m = p.message;
    const int tag = !m.abort ? kTagHeader : m.lost ? kTagAbortLost : kTagAbort;
    int rc = MPI_Isend(m.header.data(), static_cast<int>(m.header.size()), MPI_BYTE, m.dst, tag,
                       MPI_COMM_WORLD, &p.requests[0]);
    if (rc == MPI_SUCCESS && !m.abort && m.payload.nbytes() > 0)
      rc = MPI_Isend(m.payload.raw(), static_cast<int>(m.payload.nbytes()), MPI_BYTE, m.dst,
                     kTagPayload, MPI_COMM_WORLD, &p.requests[1]);
    if (rc != MPI_SUCCESS && !m.abort) mpi_failed("MPI_Isend to rank " + std::to_string(m.dst), rc);
    return p;
  }

  bool complete_sends(std::vector<Posted>& posted) {
    bool any = false;
    for (size_t i = 0; i < posted.size();) {
      int done = 0;
      int rc = MPI_Testall(2, posted[i].requests, &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS && !posted[i].message.abort) {
        mpi_failed("sending to rank " + std::to_string(posted[i].message.dst), rc);
        done = 1;
      }
      if (!done) {
        ++i;
        continue;
      }
      any = true;
      if (!posted[i].message.abort) {
        std::lock_guard<std::mutex> lock(mu_);
        pending_bytes_[static_cast<size_t>(posted[i].message.dst)] -=
            posted[i].message.payload.nbytes();
        send_cv_.notify_all();
      }
      posted.erase(posted.begin() + static_cast<std::ptrdiff_t>(i));
    }
    return any;
  }

  bool receive_headers(std::map<int, std::deque<Arriving>>& arriving) {
    bool any = false;
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kTagHeader, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS ||
          !flag)
        return any;
      any = true;
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      std::vector<char> bytes(static_cast<size_t>(count));
      int rc = MPI_Recv(bytes.data(), count, MPI_BYTE, st.MPI_SOURCE, kTagHeader, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS)
        return mpi_failed("receiving from rank " + std::to_string(st.MPI_SOURCE), rc);
      heard_from(st.MPI_SOURCE);
      Arriving a;
      ir::DType dtype{};
      ir::Shape shape;
      if (!unpack_header(bytes, a.tag, dtype, shape)) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!aborted_)
          set_aborted_locked(
              "rank " + std::to_string(rank_) + ": a malformed message arrived from rank " +
              std::to_string(st.MPI_SOURCE) + " (is every rank the same pipetrain?)");
        return true;
      }
      a.tensor = ir::Tensor(dtype, shape);
      if (a.tensor.nbytes() > 0) {
        rc = MPI_Irecv(a.tensor.raw(), static_cast<int>(a.tensor.nbytes()), MPI_BYTE, st.MPI_SOURCE,
                       kTagPayload, MPI_COMM_WORLD, &a.request);
        if (rc != MPI_SUCCESS)
          return mpi_failed("receiving from rank " + std::to_string(st.MPI_SOURCE), rc);
      }
      arriving[st.MPI_SOURCE].push_back(std::move(a));
    }
  }

  // Files finished messages, in order per source (a repeated tag stays FIFO).
  bool complete_receives(std::map<int, std::deque<Arriving>>& arriving) {
    bool any = false;
    for (auto& [src, queue] : arriving) {
      while (!queue.empty()) {
        int done = 0;
        if (MPI_Test(&queue.front().request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
          mpi_failed("receiving from rank " + std::to_string(src), MPI_ERR_OTHER);
          done = 1;
        }
        if (!done) break;
        any = true;
        std::lock_guard<std::mutex> lock(mu_);
        mailbox_[{src, queue.front().tag}].push_back(std::move(queue.front().tensor));
        queue.pop_front();
        recv_cv_.notify_all();
      }
    }
    return any;
  }

  bool receive_aborts() {
    for (int tag : {kTagAbort, kTagAbortLost}) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS || !flag)
        continue;
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      std::string text(static_cast<size_t>(count), '\0');
      MPI_Recv(text.data(), count, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      std::lock_guard<std::mutex> lock(mu_);
      if (tag == kTagAbortLost) lost_peer_ = true;  // finalize would wait for the silent rank
      if (!aborted_) set_aborted_locked(text);
      return true;
    }
    return false;
  }

  // Heartbeats: each rank tells every peer it is alive every kBeatEvery, from
  // this thread, which runs whatever the workers do. A peer not heard from
  // for peer_timeout_ (stopped, hung, its host gone: cases mpirun may never
  // notice) aborts the job naming it. A peer that closes cleanly says bye.
  struct Beats {
    explicit Beats(size_t peers) : requests(peers, MPI_REQUEST_NULL) {}
    std::vector<MPI_Request> requests;  // per peer: the beat in flight
    Clock::time_point last_sent{};
  };
  static constexpr char kBeatByte = 0;

  void send_beats(Beats& beats, bool stopping) {
    const auto now = Clock::now();
    if (peer_timeout_.count() == 0 || stopping || now - beats.last_sent < kBeatEvery) return;
    beats.last_sent = now;
    for (int r = 0; r < size_; ++r) {
      MPI_Request& req = beats.requests[static_cast<size_t>(r)];
      int done = 1, rc = MPI_SUCCESS;
      if (req != MPI_REQUEST_NULL) rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      // A peer that does not take the last beat is not sent another.
      if (rc == MPI_SUCCESS && r != rank_ && done)
        rc = MPI_Isend(&kBeatByte, 1, MPI_BYTE, r, kTagBeat, MPI_COMM_WORLD, &req);
      if (rc != MPI_SUCCESS) {
        mpi_failed("sending a heartbeat to rank " + std::to_string(r), rc);
        return;
      }
    }
  }

  // Best effort, errors ignored (we are closing): a peer that misses the bye
  // may later call us silent, harmlessly.
  void say_bye(Beats& beats) {
    for (int r = 0; r < size_; ++r) {
      MPI_Request& req = beats.requests[static_cast<size_t>(r)];
      if (req != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done) MPI_Request_free(&req);  // a 1-byte send of a static buffer
      }
      if (r != rank_ && !said_bye_[static_cast<size_t>(r)]) {
        MPI_Request bye = MPI_REQUEST_NULL;
        MPI_Isend(&kBeatByte, 1, MPI_BYTE, r, kTagBye, MPI_COMM_WORLD, &bye);
        MPI_Request_free(&bye);
      }
    }
  }

  bool receive_beats() {
    bool any = false;
    for (int tag : {kTagBeat, kTagBye}) {
      for (;;) {
        int flag = 0;
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS || !flag)
          break;
        char byte = 0;
        const int rc =
            MPI_Recv(&byte, 1, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
          return mpi_failed("receiving a heartbeat from rank " + std::to_string(st.MPI_SOURCE), rc);
        any = true;
        heard_from(st.MPI_SOURCE);
        if (tag == kTagBye) {
          std::lock_guard<std::mutex> lock(mu_);
          said_bye_[static_cast<size_t>(st.MPI_SOURCE)] = true;
        }
      }
    }
    return any;
  }

  void heard_from(int src) {
    std::lock_guard<std::mutex> lock(mu_);
    last_heard_[static_cast<size_t>(src)] = Clock::now();
  }

  bool silent_locked(int r, Clock::time_point now, std::chrono::milliseconds limit) const {
    return r != rank_ && peer_timeout_.count() > 0 && !said_bye_[static_cast<size_t>(r)] &&
           now - last_heard_[static_cast<size_t>(r)] > limit;
  }

  // First thing in each round of the loop, before any message is read: when
  // this thread itself stood still (the process was stopped, then continued)
  // the peers' beats wait unread, so start their clocks afresh rather than
  // blame them, and leave the speaking to the peers, which may have reported us.
  void check_own_pause() {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    const bool paused = peer_timeout_.count() > 0 && now - last_watch_ > peer_timeout_ / 2;
    last_watch_ = now;
    if (!paused) return;
    std::fill(last_heard_.begin(), last_heard_.end(), now);
    muted_until_ = now + 2 * peer_timeout_;
  }

  void watch_peers() {
    int lost = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) return;
      const auto now = Clock::now();
      for (int r = 0; r < size_ && lost < 0; ++r)
        if (silent_locked(r, now, peer_timeout_)) lost = r;
    }
    if (lost < 0) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lost_peer_ = true;
    }
    abort("rank " + std::to_string(lost) + " has not been heard from for " +
          fmt_seconds(peer_timeout_) +
          " (stopped, hung, or its host is unreachable; --peer-timeout sets how long to wait)");
  }

  static std::string fmt_seconds(std::chrono::milliseconds d) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(d.count()) / 1000.0);
    return text;
  }

  bool mpi_failed(const std::string& what, int rc) {
    abort(what + " failed: " + mpi_error(rc));
    return true;
  }

  void finalize() {
    bool aborted = false, lost = false;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mu_);
      aborted = aborted_;
      lost = lost_peer_;
      why = abort_message_;
    }
    // After an abort a peer may be gone, and MPI_Finalize would wait for it
    // (it surely would for a silent peer this rank saw, or for a silent rank 0
    // when this rank speaks instead: no wait then). The job's voice says why,
    // once; the others exit later than it would, since mpirun ends the job at
    // the first exit.
    const bool speaks = aborted && speaks_for_job();
    lost = lost || (speaks && rank_ != 0);
    auto give_up = [&] {
      if (speaks) {
        std::fprintf(stderr, "error: %s\n", why.c_str());
        std::fflush(stderr);
      } else {
        std::this_thread::sleep_for(kFinalizeLimit + std::chrono::seconds(1));
      }
      std::_Exit(1);
    };
    if (lost) give_up();
    std::atomic<bool> done{false};
    std::thread watchdog;
    if (aborted) {
      watchdog = std::thread([&] {
        const auto until = Clock::now() + kFinalizeLimit;
        while (!done && Clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (!done) give_up();
      });
    }
    MPI_Finalize();
    done = true;
    if (watchdog.joinable()) watchdog.join();
    // mpirun ends the job at the first exit, dropping what the other ranks
    // wrote but it had not yet forwarded. The job's voice prints after its
    // stack unwinds, past this point, so a quiet rank leaving MPI_Finalize
    // with it could end the job first and lose the one message (seen: the
    // failing-rank test's stderr had none). The quiet ones leave later.
    if (aborted && !speaks) std::this_thread::sleep_for(kQuietExitDelay);
  }

  const size_t bound_;
  const std::chrono::milliseconds peer_timeout_;  // 0: wait forever
  int rank_ = 0, size_ = 1;
  std::thread progress_;

  mutable std::mutex mu_;
  std::condition_variable recv_cv_, send_cv_, wake_;
  bool started_ = false, stop_ = false, aborted_ = false;
  bool lost_peer_ = false;       // a rank went silent (seen here, or told)
  std::atomic<int> waiting_{0};  // workers blocked in recv (read unlocked by the loop)
  std::string init_error_, abort_message_;
  std::deque<Outgoing> outgoing_;
  std::vector<size_t> pending_bytes_;  // per destination: queued or in flight
  std::map<std::pair<int, MessageTag>, std::deque<ir::Tensor>> mailbox_;
  std::map<std::vector<int>, int64_t> collective_seq_;  // per group: allreduces so far
  std::vector<Clock::time_point> last_heard_;           // per peer: its last message
  std::vector<bool> said_bye_;                          // per peer: closed cleanly
  Clock::time_point last_watch_ = Clock::now();         // the progress thread's last look
  Clock::time_point muted_until_{};                     // after standing still: others speak
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(size_t queue_bytes_bound,
                                                    std::chrono::milliseconds peer_timeout) {
  return std::make_unique<MpiCommunicator>(queue_bytes_bound, peer_timeout);
}

}  // namespace pipetrain::exec
