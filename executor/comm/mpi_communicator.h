// The `mpi` communicator: one endpoint per process of an MPI job
// (`mpirun -np N pipetrain train ... --comm mpi`), over MPI_COMM_WORLD.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "executor/comm/communicator.h"

namespace pipetrain::exec {

/// How long a silent rank is waited for before the job stops.
inline constexpr std::chrono::milliseconds kDefaultPeerTimeout{5000};

/// Ranks in the job that started this process, from the launcher's
/// environment (Open MPI, MPICH/Hydra, Slurm); 0 when no launcher started it.
int mpi_launched_size();
/// Ranks of the job on this host (for sharing its cores); 1 when unknown.
int mpi_local_size();
/// This process's rank among those on its host (for picking its GPU); 0 when unknown.
int mpi_local_rank();

/// Initialises MPI (once per process: a second call throws) and returns this
/// process's endpoint. A progress thread owns every MPI call: send() queues
/// the tensor and returns, the thread posts MPI_Isend of a small header and
/// the payload straight from the tensor's memory, receives into fresh tensors
/// with MPI_Irecv and files them by tag, so transfers overlap compute. At
/// most `queue_bytes_bound` bytes per destination are queued or in flight
/// (send blocks beyond that). allreduce_sum gathers to the group's lowest
/// rank, sums in ascending rank order (bitwise what the local communicator
/// gives) and sends the sum back. abort() tells every rank, whose calls then
/// throw with the reason. Destruction finalizes MPI (giving up after a few
/// seconds when a peer is gone). Every rank beats to every peer twice a
/// second; a peer silent for `peer_timeout` (stopped, hung, host gone) aborts
/// the job naming it (0: wait forever, e.g. under a debugger).
std::unique_ptr<Communicator> make_mpi_communicator(
    size_t queue_bytes_bound, std::chrono::milliseconds peer_timeout = kDefaultPeerTimeout);

}  // namespace pipetrain::exec
