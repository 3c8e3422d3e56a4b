// Which nodes the device backends (portable, CUDA) run, and why not the
// others: one answer for both, since they share the op implementations.
#pragma once

#include <set>
#include <string>

#include "ir/graph.h"

namespace pipetrain::exec::device {

/// True when the device backends have an implementation of `op` (shared
/// kernels, host ops, or the library ops `library`).
bool device_runs(const std::string& op, const std::set<std::string>& library);

/// Empty when a device backend whose library ops are `library` can run n as
/// typed in g; otherwise the reason. Dtypes: what the CPU kernel takes, less
/// f16/bf16 (the device kernels compute in f32, i64, i32 and bool).
std::string support_reason(const ir::Graph& g, const ir::Node& n,
                           const std::set<std::string>& library, const std::string& backend);

}  // namespace pipetrain::exec::device
