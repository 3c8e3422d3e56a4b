// The NCCL communicator (see executor/comm/nccl_communicator.h). Tensors
// reach it as host tensors (the executor's), so payloads are staged through
// cached device buffers; device-resident tensors will skip the staging.
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "executor/comm/comm_checks.h"
#include "executor/comm/nccl_communicator.h"
#include "executor/cuda/caching_allocator.h"
#include "executor/cuda/cuda_check.h"

#define PIPETRAIN_NCCL_CHECK(call)                                                                \
  do {                                                                                            \
    const ncclResult_t r_ = (call);                                                               \
    if (r_ != ncclSuccess)                                                                        \
      throw ::pipetrain::RuntimeFault(std::string(#call) + " failed: " + ncclGetErrorString(r_)); \
  } while (0)

namespace pipetrain::exec {

namespace {

constexpr int kControl = MessageTag::kCollective;

ir::Tensor bytes_tensor(const void* p, size_t n) {
  ir::Tensor t(ir::DType::kBool, {static_cast<int64_t>(n)});
  if (n) std::memcpy(t.raw(), p, n);
  return t;
}

// Header words: sequence, phase, microbatch, dtype, rank, dims..., then the name.
ir::Tensor pack_header(int64_t seq, const MessageTag& tag, const ir::Tensor& t) {
  std::vector<int64_t> w = {seq, tag.phase, tag.microbatch, static_cast<int64_t>(t.dtype()),
                            static_cast<int64_t>(t.shape().size())};
  for (int64_t d : t.shape()) w.push_back(d);
  std::string bytes(w.size() * sizeof(int64_t), '\0');
  std::memcpy(bytes.data(), w.data(), bytes.size());
  bytes += tag.tensor;
  return bytes_tensor(bytes.data(), bytes.size());
}

struct Header {
  int64_t seq = 0;
  MessageTag tag;
  ir::DType dtype = ir::DType::kUndefined;
  ir::Shape shape;
};

Header unpack_header(const ir::Tensor& t) {
  const char* p = static_cast<const char*>(t.raw());
  auto word = [&](size_t i) {
    int64_t v = 0;
    std::memcpy(&v, p + i * sizeof(int64_t), sizeof(int64_t));
    return v;
  };
  Header h;
  h.seq = word(0);
  h.tag.phase = static_cast<int>(word(1));
  h.tag.microbatch = word(2);
  h.dtype = static_cast<ir::DType>(word(3));
  const int64_t rank = word(4);
  for (int64_t i = 0; i < rank; ++i) h.shape.push_back(word(static_cast<size_t>(5 + i)));
  const size_t at = static_cast<size_t>(5 + rank) * sizeof(int64_t);
  h.tag.tensor.assign(p + at, t.nbytes() - at);
  return h;
}

// One direction between two ranks: its own NCCL communicator (ranks 0 =
// sender, 1 = receiver) and stream, so its operations stay in order.
struct Channel {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// A send whose device buffer is in use until its event completes.
struct InFlight {
  int dst;
  void* buffer;
  size_t bytes;
  cudaEvent_t done;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& control, int device, size_t bound)
      : control_(control), device_(device), bound_(bound) {
    PIPETRAIN_CUDA_CHECK(cudaSetDevice(device_));
    const int n = control_.size(), me = control_.rank();
    out_.resize(static_cast<size_t>(n));
    in_.resize(static_cast<size_t>(n));
    next_send_.assign(static_cast<size_t>(n), 0);
    next_recv_.assign(static_cast<size_t>(n), 0);
    pending_.assign(static_cast<size_t>(n), 0);
    // Every ordered pair in one global order: a rank blocks in a pair's init
    // only while its partner works through the same list.
    for (int s = 0; s < n; ++s)
      for (int r = 0; r < n; ++r) {
        if (s == r || (me != s && me != r)) continue;
        const MessageTag id_tag{"nccl/pair-id", s * n + r, kControl};
        ncclUniqueId id;
        if (me == s) {
          PIPETRAIN_NCCL_CHECK(ncclGetUniqueId(&id));
          control_.send(r, id_tag, bytes_tensor(&id, sizeof(id)));
        } else {
          const ir::Tensor t = control_.recv(s, id_tag);
          std::memcpy(&id, t.raw(), sizeof(id));
        }
        Channel& ch = me == s ? out_[static_cast<size_t>(r)] : in_[static_cast<size_t>(s)];
        PIPETRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&ch.stream, cudaStreamNonBlocking));
        PIPETRAIN_NCCL_CHECK(ncclCommInitRank(&ch.comm, 2, id, me == s ? 0 : 1));
      }
  }

  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    for (auto* channels : {&out_, &in_})
      for (Channel& ch : *channels) {
        if (ch.stream) cudaStreamSynchronize(ch.stream);
        if (ch.comm) (aborted_ ? ncclCommAbort : ncclCommDestroy)(ch.comm);
        if (ch.stream) cudaStreamDestroy(ch.stream);
      }
    for (auto& [group, g] : groups_) {
      cudaStreamSynchronize(g.stream);
      (aborted_ ? ncclCommAbort : ncclCommDestroy)(g.comm);
      cudaStreamDestroy(g.stream);
    }
    for (InFlight& f : in_flight_) {
      memory_.release(f.buffer, f.bytes);
      cudaEventDestroy(f.done);
    }
  }

  int rank() const override { return control_.rank(); }
  int size() const override { return control_.size(); }
  bool speaks_for_job() const override { return control_.speaks_for_job(); }

  void abort(const std::string& why) noexcept override {
    aborted_ = true;
    for (auto* channels : {&out_, &in_})
      for (Channel& ch : *channels)
        if (ch.comm) {
          ncclCommAbort(ch.comm);
          ch.comm = nullptr;
        }
    control_.abort(why);
  }

 protected:
  void do_send(int dst, const MessageTag& tag, const ir::Tensor& t, CommTimeout timeout) override {
    check_comm_peer(rank(), size(), dst, "send to");
    PIPETRAIN_CUDA_CHECK(cudaSetDevice(device_));
    reap(false);
    // Backpressure: wait for earlier sends to this peer to drain.
    while (pending_[static_cast<size_t>(dst)] != 0 &&
           pending_[static_cast<size_t>(dst)] + t.nbytes() > bound_)
      reap(true);
    const int64_t seq = next_send_[static_cast<size_t>(dst)]++;
    control_.send(dst, {"nccl/header", seq, kControl}, pack_header(seq, tag, t), timeout);
    if (t.nbytes() == 0) return;
    void* buf = memory_.allocate(t.nbytes());
    Channel& ch = out_[static_cast<size_t>(dst)];
    PIPETRAIN_CUDA_CHECK(
        cudaMemcpyAsync(buf, t.raw(), t.nbytes(), cudaMemcpyHostToDevice, ch.stream));
    PIPETRAIN_NCCL_CHECK(ncclSend(buf, t.nbytes(), ncclUint8, 1, ch.comm, ch.stream));
    cudaEvent_t done;
    PIPETRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    PIPETRAIN_CUDA_CHECK(cudaEventRecord(done, ch.stream));
    in_flight_.push_back({dst, buf, t.nbytes(), done});
    pending_[static_cast<size_t>(dst)] += t.nbytes();
  }

  ir::Tensor do_recv(int src, const MessageTag& tag, CommTimeout timeout) override {
    check_comm_peer(rank(), size(), src, "recv from");
    PIPETRAIN_CUDA_CHECK(cudaSetDevice(device_));
    const auto key = std::make_pair(src, tag);
    for (;;) {
      if (auto it = filed_.find(key); it != filed_.end()) {
        ir::Tensor t = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) filed_.erase(it);
        return t;
      }
      // The next message from src, in the order it was sent.
      const int64_t seq = next_recv_[static_cast<size_t>(src)]++;
      const Header h = unpack_header(control_.recv(src, {"nccl/header", seq, kControl}, timeout));
      ir::Tensor t(h.dtype, h.shape);
      if (t.nbytes() > 0) {
        Channel& ch = in_[static_cast<size_t>(src)];
        void* buf = memory_.allocate(t.nbytes());
        PIPETRAIN_NCCL_CHECK(ncclRecv(buf, t.nbytes(), ncclUint8, 0, ch.comm, ch.stream));
        PIPETRAIN_CUDA_CHECK(
            cudaMemcpyAsync(t.raw(), buf, t.nbytes(), cudaMemcpyDeviceToHost, ch.stream));
        const cudaError_t err = cudaStreamSynchronize(ch.stream);
        memory_.release(buf, t.nbytes());
        if (err != cudaSuccess)
          throw RuntimeFault("rank " + std::to_string(rank()) + ": receiving " + h.tag.to_string() +
                             " from rank " + std::to_string(src) +
                             " failed: " + cudaGetErrorString(err));
      }
      filed_[{src, h.tag}].push_back(std::move(t));
    }
  }

  void do_allreduce_sum(const std::vector<int>& group, std::vector<ir::Tensor*> tensors,
                        CommTimeout timeout) override {
    check_comm_group(rank(), size(), group, tensors);
    std::vector<int> members = group;
    std::sort(members.begin(), members.end());
    if (members.size() == 1) return;
    PIPETRAIN_CUDA_CHECK(cudaSetDevice(device_));
    Group& g = group_comm(members, timeout);
    for (ir::Tensor* t : tensors) {
      if (t->nbytes() == 0) continue;
      const ncclDataType_t type = t->dtype() == ir::DType::kF32   ? ncclFloat32
                                  : t->dtype() == ir::DType::kI32 ? ncclInt32
                                                                  : ncclInt64;
      void* buf = memory_.allocate(t->nbytes());
      PIPETRAIN_CUDA_CHECK(
          cudaMemcpyAsync(buf, t->raw(), t->nbytes(), cudaMemcpyHostToDevice, g.stream));
      PIPETRAIN_NCCL_CHECK(ncclAllReduce(buf, buf, static_cast<size_t>(t->numel()), type, ncclSum,
                                         g.comm, g.stream));
      PIPETRAIN_CUDA_CHECK(
          cudaMemcpyAsync(t->raw(), buf, t->nbytes(), cudaMemcpyDeviceToHost, g.stream));
      const cudaError_t err = cudaStreamSynchronize(g.stream);
      memory_.release(buf, t->nbytes());
      if (err != cudaSuccess)
        throw RuntimeFault("rank " + std::to_string(rank()) + ": allreduce over " +
                           describe_group(members) + " failed: " + cudaGetErrorString(err));
    }
  }

 private:
  struct Group {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
  };

  // The group's NCCL communicator, created by every member at its first
  // allreduce; the lowest member shares the id.
  Group& group_comm(const std::vector<int>& members, CommTimeout timeout) {
    auto it = groups_.find(members);
    if (it != groups_.end()) return it->second;
    const int index =
        static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    const MessageTag id_tag{"nccl/group-id " + describe_group(members), 0, kControl};
    ncclUniqueId id;
    if (index == 0) {
      PIPETRAIN_NCCL_CHECK(ncclGetUniqueId(&id));
      for (size_t m = 1; m < members.size(); ++m)
        control_.send(members[m], id_tag, bytes_tensor(&id, sizeof(id)), timeout);
    } else {
      const ir::Tensor t = control_.recv(members[0], id_tag, timeout);
      std::memcpy(&id, t.raw(), sizeof(id));
    }
    Group g;
    PIPETRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    PIPETRAIN_NCCL_CHECK(ncclCommInitRank(&g.comm, static_cast<int>(members.size()), id, index));
    return groups_.emplace(members, g).first->second;
  }

  // Frees the buffers of completed sends; with `wait`, waits for the oldest.
  void reap(bool wait) {
    if (wait && !in_flight_.empty())
      PIPETRAIN_CUDA_CHECK(cudaEventSynchronize(in_flight_.front().done));
    while (!in_flight_.empty() && cudaEventQuery(in_flight_.front().done) == cudaSuccess) {
      InFlight& f = in_flight_.front();
      pending_[static_cast<size_t>(f.dst)] -= f.bytes;
      memory_.release(f.buffer, f.bytes);
      cudaEventDestroy(f.done);
      in_flight_.pop_front();
    }
  }

  Communicator& control_;
  const int device_;
  const size_t bound_;
  bool aborted_ = false;
  std::vector<Channel> out_, in_;  // per peer: the channel to it, from it
  std::vector<int64_t> next_send_, next_recv_;
  std::vector<size_t> pending_;  // per peer: bytes of sends not yet completed
  std::deque<InFlight> in_flight_;
  std::map<std::pair<int, MessageTag>, std::deque<ir::Tensor>> filed_;
  std::map<std::vector<int>, Group> groups_;
  cuda::CachingAllocator memory_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& control, int device,
                                                     size_t queue_bytes_bound) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
    throw RuntimeFault("--comm nccl needs a CUDA device, and none is present");
  if (device < 0 || device >= n)
    throw RuntimeFault("CUDA device " + std::to_string(device) + " does not exist (" +
                       std::to_string(n) + " present)");
  return std::make_unique<NcclCommunicator>(control, device, queue_bytes_bound);
}

}  // namespace pipetrain::exec
