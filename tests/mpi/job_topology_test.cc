// measure_job_topology as a 4-rank MPI job on one host: one level of all
// ranks, with a positive bandwidth and latency, the same on every rank.
#include "executor/pipeline/job_topology.h"

#include <gtest/gtest.h>

#include <cmath>

#include "executor/comm/mpi_communicator.h"
#include "executor/pipeline/rank_reports.h"

namespace pipetrain::exec {
namespace {

Communicator* g_comm = nullptr;

TEST(JobTopology, OneHostIsOneLevelOfEveryRankWithMeasuredLinks) {
  const partitioner::Topology t = measure_job_topology(*g_comm, size_t(1) << 20, 2);
  ASSERT_EQ(t.levels.size(), 1u);
  EXPECT_EQ(t.levels[0].count, g_comm->size());
  EXPECT_TRUE(std::isfinite(t.levels[0].bandwidth));
  EXPECT_GT(t.levels[0].bandwidth, 1e6);  // shared memory moves far more than 1 MB/s
  EXPECT_GT(t.levels[0].latency_s, 0.0);
  EXPECT_LT(t.levels[0].latency_s, 1.0);
  // Every rank plans with rank 0's figures.
  const std::string mine = partitioner::to_json(t).dump();
  EXPECT_EQ(share_text(*g_comm, "test/topology", mine), mine);
}

}  // namespace
}  // namespace pipetrain::exec

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = pipetrain::exec::make_mpi_communicator(size_t(1) << 24);
  pipetrain::exec::g_comm = comm.get();
  if (comm->rank() != 0) GTEST_FLAG_SET(brief, true);
  const int rc = RUN_ALL_TESTS();
  comm.reset();
  return rc;
}
