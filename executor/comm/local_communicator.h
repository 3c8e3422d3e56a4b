// The `local` communicator: every worker is a thread of this process.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "executor/comm/communicator.h"

namespace pipetrain::exec {

/// `size` connected endpoints (rank i at index i) sharing one state. Each
/// (src, dst) mailbox holds at most `queue_bytes_bound` bytes in flight; send
/// blocks beyond that (backpressure), except that a single message larger
/// than the bound is admitted into an empty mailbox. Tensors travel by handle
/// (no copy). Waiting uses condition variables, never spinning. Destroying an
/// endpoint makes its peers' waits on it throw instead of hanging; destroying
/// all endpoints with messages still queued just frees them. With `spin`, a
/// receive polls for up to that long before it sleeps (for workers that each
/// have a core of their own: waking a sleeping thread costs more).
std::vector<std::unique_ptr<Communicator>> make_local_communicators(
    int size, size_t queue_bytes_bound, std::chrono::microseconds spin = {});

}  // namespace pipetrain::exec
