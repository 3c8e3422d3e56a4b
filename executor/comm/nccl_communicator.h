// The `nccl` communicator: payloads move between GPUs with ncclSend/ncclRecv
// and replicas sum with ncclAllReduce, while a control communicator (mpi
// across processes, local between the threads of one) carries the message
// headers, the NCCL unique ids and aborts.
#pragma once

#include <cstddef>
#include <memory>

#include "executor/comm/communicator.h"

namespace pipetrain::exec {

/// This rank's NCCL endpoint on CUDA device `device`, with the same rank and
/// size as `control` (which must outlive it). Collective over every rank of
/// control: each creates one NCCL communicator per ordered pair of ranks (so
/// each direction has its own ordered channel and stream) in a fixed order,
/// the pair's sender sharing the unique id over control.
///
/// send() stages the tensor into device memory and enqueues ncclSend on the
/// pair's stream (the host thread goes on); its header (tag, dtype, shape,
/// a per-pair sequence number) goes over control. recv() takes headers from
/// the source in sequence order, posts the matching ncclRecv, and files
/// tensors it did not ask for yet by tag, so receives may come in any order.
/// allreduce_sum() creates one NCCL communicator per group on first use (the
/// members call it in the same order) and sums with ncclAllReduce: every
/// member gets the same values, summed in NCCL's ring order (not the local
/// communicator's ascending rank order). abort() aborts every NCCL
/// communicator and tells the others through control.
///
/// Throws RuntimeFault in a build without CUDA.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& control, int device,
                                                     size_t queue_bytes_bound);

}  // namespace pipetrain::exec
