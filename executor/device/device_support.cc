#include "executor/device/device_support.h"

#include "executor/backend.h"
#include "executor/device/device_ops.h"

namespace pipetrain::exec::device {

namespace {

struct NoExec {  // only to read the table's keys
  template <typename F>
  void for_each(int64_t, const F&) {}
  template <typename T>
  const T* upload(const std::vector<T>&) {
    return nullptr;
  }
  template <typename T>
  T* scratch(int64_t) {
    return nullptr;
  }
  void gemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
            int64_t, float, float*, int64_t) {}
  void gemm_batched(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t,
                    const float*, int64_t, int64_t, float, float*, int64_t, int64_t, int64_t) {}
  int64_t attention_gather_elems() const { return 1; }
  int64_t block_workers(int64_t) const { return 1; }
  template <typename F>
  void run_workers(int64_t, const F&) {}
};

}  // namespace

bool device_runs(const std::string& op, const std::set<std::string>& library) {
  return device_ops<NoExec>().count(op) || host_ops().count(op) || library.count(op);
}

std::string support_reason(const ir::Graph& g, const ir::Node& n,
                           const std::set<std::string>& library, const std::string& backend) {
  if (!device_runs(n.op_type, library))
    return "the " + backend + " backend has no kernel for " + n.op_type + " yet";
  static const auto cpu = make_cpu_backend();
  if (std::string why = cpu->unsupported_reason(g, n); !why.empty()) return why;
  auto half = [&](const std::string& t) {
    if (t.empty() || !g.has_tensor(t)) return false;
    const ir::DType d = g.tensor(t).dtype;
    return d == ir::DType::kF16 || d == ir::DType::kBF16;
  };
  for (const auto& t : n.inputs)
    if (half(t))
      return n.op_type + " on " + t + ": f16/bf16 tensors are not on the " + backend +
             " backend yet (cast to f32)";
  for (const auto& t : n.outputs)
    if (half(t))
      return n.op_type + " on " + t + ": f16/bf16 tensors are not on the " + backend +
             " backend yet (cast to f32)";
  return "";
}

}  // namespace pipetrain::exec::device
