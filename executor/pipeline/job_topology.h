// The links of a multi-process job (--comm mpi/nccl), measured rather than
// assumed, so the partitioner and the simulator price transfers at what the
// job's communicator really moves: ranks are grouped by host, and each
// level's bandwidth is timed by a ping-pong through the communicator itself
// (its copies, progress thread and transport included).
#pragma once

#include <cstddef>

#include "executor/comm/communicator.h"
#include "partitioner/topology.h"

namespace pipetrain::exec {

/// Collective: every rank calls it and gets the same topology. When every
/// host runs the same number of consecutive ranks (mpirun's default block
/// mapping), two levels: hosts, then ranks per host; otherwise one level of
/// all ranks at the slowest measured link. Each bandwidth is `bytes` sent and
/// returned `rounds` times between two ranks of the level.
partitioner::Topology measure_job_topology(Communicator& comm, size_t bytes = size_t(4) << 20,
                                           int rounds = 4);

}  // namespace pipetrain::exec
