#include "executor/comm/comm_checks.h"

#include <algorithm>

namespace pipetrain::exec {

std::string MessageTag::to_string() const {
  return std::string(phase == kForward      ? "fwd"
                     : phase == kBackward   ? "bwd"
                     : phase == kCollective ? "allreduce"
                     : phase == kTied       ? "tied"
                                            : "phase?") +
         " '" + tensor + "' mb " + std::to_string(microbatch);
}

std::string describe_group(const std::vector<int>& group) {
  std::string s = "{";
  for (size_t i = 0; i < group.size(); ++i) s += (i ? ", " : "") + std::to_string(group[i]);
  return s + "}";
}

namespace {

template <typename T>
void add_into(ir::Tensor& out, const ir::Tensor& in) {
  T* o = out.data<T>();
  const T* x = in.data<T>();
  for (int64_t i = 0, n = out.numel(); i < n; ++i) o[i] += x[i];
}

}  // namespace

void accumulate(ir::Tensor& out, const ir::Tensor& in) {
  switch (out.dtype()) {
    case ir::DType::kF32: add_into<float>(out, in); break;
    case ir::DType::kI32: add_into<int32_t>(out, in); break;
    case ir::DType::kI64: add_into<int64_t>(out, in); break;
    default: break;  // rejected by check_comm_group
  }
}

void check_comm_peer(int rank, int size, int peer, const char* what) {
  if (peer < 0 || peer >= size)
    throw RuntimeFault("rank " + std::to_string(rank) + ": " + what + " rank " +
                       std::to_string(peer) + ", but there are " + std::to_string(size) + " ranks");
}

void check_comm_group(int rank, int size, const std::vector<int>& group,
                      const std::vector<ir::Tensor*>& tensors) {
  std::vector<int> sorted = group;
  std::sort(sorted.begin(), sorted.end());
  const bool bad = sorted.empty() ||
                   std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
                   sorted.front() < 0 || sorted.back() >= size ||
                   !std::binary_search(sorted.begin(), sorted.end(), rank);
  if (bad)
    throw RuntimeFault("rank " + std::to_string(rank) + ": allreduce group " +
                       describe_group(group) + " must be distinct ranks below " +
                       std::to_string(size) + " that include this rank");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ir::DType d = tensors[i]->dtype();
    if (d != ir::DType::kF32 && d != ir::DType::kI32 && d != ir::DType::kI64)
      throw RuntimeFault("rank " + std::to_string(rank) + ": allreduce tensor " +
                         std::to_string(i) + " has dtype " + ir::dtype_name(d) +
                         "; only f32, i32 and i64 are summed");
  }
}

RuntimeFault comm_timed_out(int rank, const char* what, int peer, const MessageTag& tag,
                            CommTimeout timeout) {
  return RuntimeFault("rank " + std::to_string(rank) + ": " + what + " rank " +
                      std::to_string(peer) + " timed out after " +
                      std::to_string(timeout ? timeout->count() : 0) + " ms waiting for " +
                      tag.to_string());
}

}  // namespace pipetrain::exec
