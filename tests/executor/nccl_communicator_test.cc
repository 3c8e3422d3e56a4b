// The nccl communicator's contract, one worker thread per GPU of this machine
// (the local communicator carries the control side, so no MPI is needed: the
// GPU bundle runs it on a bare machine). Every test skips without a CUDA
// device; send/recv needs two GPUs, since NCCL refuses two ranks on one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <thread>

#include "executor/backend.h"
#include "executor/comm/local_communicator.h"
#include "executor/comm/nccl_communicator.h"

namespace pipetrain::exec {
namespace {

constexpr int kMaxRanks = 4;

ir::Tensor pattern(int rank, int salt, ir::Shape shape) {
  ir::Tensor t(ir::DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = 0.25f * static_cast<float>((i * 5 + rank * 11 + salt) % 37);
  return t;
}

bool same(const ir::Tensor& a, const ir::Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Runs `body(rank)` on one thread per rank and waits for all.
void on_every_rank(int ranks, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  // NCCL communicators are made collectively, once for the whole suite.
  static void SetUpTestSuite() {
    ranks_ = std::min(cuda_device_count(), kMaxRanks);
    if (ranks_ == 0) return;
    control_ = make_local_communicators(ranks_, size_t(1) << 20);
    nccl_.resize(static_cast<size_t>(ranks_));
    on_every_rank(ranks_, [](int r) {
      nccl_[static_cast<size_t>(r)] =
          make_nccl_communicator(*control_[static_cast<size_t>(r)], r, size_t(1) << 20);
    });
  }
  static void TearDownTestSuite() {
    nccl_.clear();  // before the control communicators they talk over
    control_.clear();
  }
  void SetUp() override {
    if (ranks_ == 0) GTEST_SKIP() << "no CUDA device";
  }
  static Communicator& comm(int rank) { return *nccl_[static_cast<size_t>(rank)]; }

  static inline int ranks_ = 0;
  static inline std::vector<std::unique_ptr<Communicator>> control_, nccl_;
};

TEST_F(NcclCommunicatorTest, EveryRankHasItsPlace) {
  for (int r = 0; r < ranks_; ++r) {
    EXPECT_EQ(comm(r).rank(), r);
    EXPECT_EQ(comm(r).size(), ranks_);
  }
}

TEST_F(NcclCommunicatorTest, ReceivesByExactTagWhateverTheOrder) {
  if (ranks_ < 2) GTEST_SKIP() << "send/recv needs 2 GPUs (NCCL refuses two ranks on one GPU)";
  on_every_rank(ranks_, [](int r) {
    const int n = ranks_, next = (r + 1) % n, prev = (r + n - 1) % n;
    for (int mb = 2; mb >= 0; --mb)
      comm(r).send(next, {"act", mb, MessageTag::kForward}, pattern(r, mb, {64, 33}));
    for (int mb = 0; mb < 3; ++mb)
      EXPECT_TRUE(same(comm(r).recv(prev, {"act", mb, MessageTag::kForward}),
                       pattern(prev, mb, {64, 33})))
          << "rank " << r << " microbatch " << mb;
  });
}

TEST_F(NcclCommunicatorTest, AllreduceGivesEveryMemberTheSum) {
  std::vector<int> all(static_cast<size_t>(ranks_));
  std::iota(all.begin(), all.end(), 0);
  on_every_rank(ranks_, [&all](int r) {
    ir::Tensor t = pattern(r, 7, {1000});
    comm(r).allreduce_sum(all, {&t});
    for (int64_t i = 0; i < t.numel(); ++i) {
      float want = 0;
      for (int m : all) want += pattern(m, 7, {1000}).data<float>()[i];
      EXPECT_NEAR(t.data<float>()[i], want, 1e-4f) << "rank " << r << " element " << i;
    }
  });
}

}  // namespace
}  // namespace pipetrain::exec
