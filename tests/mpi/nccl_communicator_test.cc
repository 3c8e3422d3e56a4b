// The nccl communicator's contract as a 2-rank MPI job on GPUs (ctest starts
// it with mpiexec -np 2; every test skips without a CUDA device).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "executor/backend.h"
#include "executor/comm/mpi_communicator.h"
#include "executor/comm/nccl_communicator.h"

namespace pipetrain::exec {
namespace {

Communicator* g_comm = nullptr;

ir::Tensor pattern(int rank, int salt, ir::Shape shape) {
  ir::Tensor t(ir::DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = 0.25f * static_cast<float>((i * 5 + rank * 11 + salt) % 37);
  return t;
}

bool same(const ir::Tensor& a, const ir::Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(NcclCommunicator, ReceivesByExactTagWhateverTheOrder) {
  if (!g_comm) GTEST_SKIP() << "no CUDA device";
  const int r = g_comm->rank(), n = g_comm->size(), next = (r + 1) % n, prev = (r + n - 1) % n;
  for (int mb = 2; mb >= 0; --mb)
    g_comm->send(next, {"act", mb, MessageTag::kForward}, pattern(r, mb, {64, 33}));
  for (int mb = 0; mb < 3; ++mb)
    EXPECT_TRUE(
        same(g_comm->recv(prev, {"act", mb, MessageTag::kForward}), pattern(prev, mb, {64, 33})));
}

TEST(NcclCommunicator, AllreduceGivesEveryMemberTheSum) {
  if (!g_comm) GTEST_SKIP() << "no CUDA device";
  std::vector<int> all(static_cast<size_t>(g_comm->size()));
  std::iota(all.begin(), all.end(), 0);
  ir::Tensor t = pattern(g_comm->rank(), 7, {1000});
  g_comm->allreduce_sum(all, {&t});
  for (int64_t i = 0; i < t.numel(); ++i) {
    float want = 0;
    for (int m : all) want += pattern(m, 7, {1000}).data<float>()[i];
    EXPECT_NEAR(t.data<float>()[i], want, 1e-4f) << i;
  }
}

}  // namespace
}  // namespace pipetrain::exec

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto control = pipetrain::exec::make_mpi_communicator(size_t(1) << 20);
  std::unique_ptr<pipetrain::exec::Communicator> comm;
  if (const int gpus = pipetrain::exec::cuda_device_count(); gpus > 0)
    comm =
        pipetrain::exec::make_nccl_communicator(*control, control->rank() % gpus, size_t(1) << 20);
  pipetrain::exec::g_comm = comm.get();
  if (control->rank() != 0) GTEST_FLAG_SET(brief, true);
  const int rc = RUN_ALL_TESTS();
  comm.reset();
  control.reset();
  return rc;
}
