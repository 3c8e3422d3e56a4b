// The mpi communicator's contract, run as an MPI job (ctest starts it with
// mpiexec -np 4): every rank runs the same tests in the same order, so the
// tags line up. The abort test comes last: it ends the communicator.
#include "executor/comm/mpi_communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>

#include "ir/error.h"

namespace pipetrain::exec {
namespace {

Communicator* g_comm = nullptr;

// A tensor whose values depend on (rank, salt), so every rank can compute every rank's.
ir::Tensor pattern(int rank, int salt, ir::Shape shape) {
  ir::Tensor t(ir::DType::kF32, std::move(shape));
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = 0.1f * static_cast<float>((i * 7 + rank * 13 + salt) % 101) - 3.3f;
  return t;
}

bool bitwise_equal(const ir::Tensor& a, const ir::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(MpiCommunicator, RunsAsAJobOfSeveralRanks) {
  ASSERT_GE(g_comm->size(), 2) << "start this test with mpiexec -np 4";
  EXPECT_EQ(g_comm->size(), mpi_launched_size());
}

TEST(MpiCommunicator, ReceivesByExactTagWhateverTheOrder) {
  const int r = g_comm->rank(), n = g_comm->size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  // Sent in the order mb 2, 1, 0 with mixed phases; received 0, 1, 2.
  for (int mb = 2; mb >= 0; --mb)
    g_comm->send(next, {"act", mb, mb % 2 ? MessageTag::kBackward : MessageTag::kForward},
                 pattern(r, mb, {3, 5}));
  for (int mb = 0; mb < 3; ++mb) {
    ir::Tensor t =
        g_comm->recv(prev, {"act", mb, mb % 2 ? MessageTag::kBackward : MessageTag::kForward});
    EXPECT_TRUE(bitwise_equal(t, pattern(prev, mb, {3, 5}))) << "mb " << mb;
  }
}

TEST(MpiCommunicator, CarriesEveryDtypeAndEmptyTensors) {
  const int r = g_comm->rank(), n = g_comm->size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  ir::Tensor ids(ir::DType::kI64, {4});
  for (int i = 0; i < 4; ++i) ids.data<int64_t>()[i] = int64_t(r) << 40 | i;
  ir::Tensor empty(ir::DType::kF32, {0, 7});
  ir::Tensor scalar(ir::DType::kF32, {});
  scalar.data<float>()[0] = 1.5f + static_cast<float>(r);
  g_comm->send(next, {"ids", 0, MessageTag::kForward}, ids);
  g_comm->send(next, {"empty", 0, MessageTag::kForward}, empty);
  g_comm->send(next, {"scalar", 0, MessageTag::kForward}, scalar);
  ir::Tensor s = g_comm->recv(prev, {"scalar", 0, MessageTag::kForward});
  ir::Tensor e = g_comm->recv(prev, {"empty", 0, MessageTag::kForward});
  ir::Tensor i = g_comm->recv(prev, {"ids", 0, MessageTag::kForward});
  EXPECT_EQ(s.shape(), ir::Shape{});
  EXPECT_EQ(s.data<float>()[0], 1.5f + static_cast<float>(prev));
  EXPECT_EQ(e.shape(), (ir::Shape{0, 7}));
  ASSERT_EQ(i.dtype(), ir::DType::kI64);
  EXPECT_EQ(i.data<int64_t>()[3], int64_t(prev) << 40 | 3);
}

TEST(MpiCommunicator, MessagesLargerThanTheQueueBoundGoThrough) {
  // The bound is 1 MiB (main): 12 messages of 4 MiB each wait for the previous ones.
  const int r = g_comm->rank(), n = g_comm->size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (int k = 0; k < 12; ++k)
    g_comm->send(next, {"big", k, MessageTag::kForward}, pattern(r, k, {1024, 1024}));
  for (int k = 0; k < 12; ++k)
    EXPECT_TRUE(bitwise_equal(g_comm->recv(prev, {"big", k, MessageTag::kForward}),
                              pattern(prev, k, {1024, 1024})));
}

TEST(MpiCommunicator, AllreduceSumsInAscendingRankOrderOnEveryMember) {
  const int r = g_comm->rank(), n = g_comm->size();
  std::vector<int> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  std::vector<int> odd;  // a subgroup, given out of order
  for (int k = n - 1; k >= 0; --k)
    if (k % 2) odd.push_back(k);
  for (const auto& group : {all, odd}) {
    if (std::find(group.begin(), group.end(), r) == group.end()) continue;
    ir::Tensor a = pattern(r, 1, {257}), b = pattern(r, 2, {3, 3});
    g_comm->allreduce_sum(group, {&a, &b});
    std::vector<int> sorted = group;
    std::sort(sorted.begin(), sorted.end());
    ir::Tensor ea = pattern(sorted[0], 1, {257}), eb = pattern(sorted[0], 2, {3, 3});
    for (size_t m = 1; m < sorted.size(); ++m) {
      ir::Tensor xa = pattern(sorted[m], 1, {257}), xb = pattern(sorted[m], 2, {3, 3});
      for (int64_t i = 0; i < ea.numel(); ++i) ea.data<float>()[i] += xa.data<float>()[i];
      for (int64_t i = 0; i < eb.numel(); ++i) eb.data<float>()[i] += xb.data<float>()[i];
    }
    EXPECT_TRUE(bitwise_equal(a, ea));
    EXPECT_TRUE(bitwise_equal(b, eb));
  }
}

TEST(MpiCommunicator, ARecvWithATimeoutSaysWhatItWaitedFor) {
  const int prev = (g_comm->rank() + g_comm->size() - 1) % g_comm->size();
  try {
    g_comm->recv(prev, {"never", 9, MessageTag::kForward}, std::chrono::milliseconds(100));
    FAIL() << "the receive should have timed out";
  } catch (const RuntimeFault& e) {
    EXPECT_NE(std::string(e.what()).find("timed out after 100 ms waiting for fwd 'never' mb 9"),
              std::string::npos)
        << e.what();
  }
}

TEST(MpiCommunicator, AbortStopsEveryRankWithTheReasonAndTheRank) {
  // Rank 1 aborts once every rank is done with the earlier tests (the
  // allreduce); the others are in that allreduce or receiving from rank 1.
  const int r = g_comm->rank();
  std::vector<int> all(static_cast<size_t>(g_comm->size()));
  std::iota(all.begin(), all.end(), 0);
  ir::Tensor sync = pattern(r, 0, {1});
  const auto start = std::chrono::steady_clock::now();
  if (r == 1) {
    g_comm->allreduce_sum(all, {&sync});
    g_comm->abort("the loss is NaN");
  } else {
    try {
      g_comm->allreduce_sum(all, {&sync});
      g_comm->recv(1, {"never", 0, MessageTag::kForward}, std::chrono::seconds(20));
      FAIL() << "the receive should have thrown";
    } catch (const RuntimeFault& e) {
      EXPECT_NE(std::string(e.what()).find("communicator aborted by rank 1: the loss is NaN"),
                std::string::npos)
          << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
  // Every later call throws too.
  EXPECT_THROW(g_comm->send((r + 1) % g_comm->size(), {"after", 0, 0}, pattern(r, 0, {2})),
               RuntimeFault);
}

}  // namespace
}  // namespace pipetrain::exec

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = pipetrain::exec::make_mpi_communicator(size_t(1) << 20);
  pipetrain::exec::g_comm = comm.get();
  // Rank 0 prints the report; the others print their failures only.
  if (comm->rank() != 0) GTEST_FLAG_SET(brief, true);
  const int rc = RUN_ALL_TESTS();
  comm.reset();
  return rc;
}
