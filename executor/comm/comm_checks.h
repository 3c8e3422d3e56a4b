// What every communicator checks and says the same way: peers and groups in
// range, allreduce dtypes, the sum order, and the wording of its errors.
#pragma once

#include <string>
#include <vector>

#include "executor/comm/communicator.h"
#include "ir/error.h"
#include "ir/tensor.h"

namespace pipetrain::exec {

/// "{0, 2, 3}".
std::string describe_group(const std::vector<int>& group);
/// out += in element-wise (f32, i32, i64: the dtypes allreduce sums).
void accumulate(ir::Tensor& out, const ir::Tensor& in);
/// Throws RuntimeFault unless 0 <= peer < size.
void check_comm_peer(int rank, int size, int peer, const char* what);
/// Throws RuntimeFault unless group is distinct ranks below size that
/// include rank, and every tensor is f32, i32 or i64.
void check_comm_group(int rank, int size, const std::vector<int>& group,
                      const std::vector<ir::Tensor*>& tensors);
/// "rank 1: recv from rank 0 timed out after 50 ms waiting for fwd 'x' mb 3".
RuntimeFault comm_timed_out(int rank, const char* what, int peer, const MessageTag& tag,
                            CommTimeout timeout);

}  // namespace pipetrain::exec
