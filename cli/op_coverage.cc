// `pipetrain inspect --ops`: the operator coverage table, generated from the
// one op list (ir/op_list.h), the schemas, the gradient rules and the kernel
// tables, so it cannot drift from what the build runs.
#include <algorithm>
#include <fmt/core.h>
#include <onnx/defs/schema.h>

#include <string>
#include <vector>

#include "autodiff/grad_builder.h"
#include "cli/op_coverage.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/device/device_ops.h"
#include "executor/device/device_support.h"
#include "importer/op_expansions.h"
#include "ir/op_list.h"
#include "ir/op_registry.h"

namespace pipetrain::cli {

namespace {

/// The first default-domain opset that defines op, as libonnx knows them.
std::string since_opset(const std::string& op) {
  for (int v = 1; v <= 17; ++v)
    if (onnx::OpSchemaRegistry::Schema(op, v, "")) return std::to_string(v);
  return "-";
}

std::string gradient(const std::string& op) {
  const ir::OpSchema* s = ir::OpRegistry::instance().find(op);
  if (!s || !s->differentiable) return "not differentiable";
  const auto& rules = autodiff::rule_registry();
  auto it = rules.find(op);
  if (it == rules.end()) return "MISSING";
  return it->second.rule ? "yes" : "zero (piecewise constant)";
}

std::string device(const std::string& op) {
  if (op == "Gemm" || op == "MatMul") return "cuBLAS";
  if (exec::device::host_ops().count(op)) return "host (shape metadata)";
  return exec::device::device_runs(op, {}) ? "yes" : "no";
}

std::string dtypes(const exec::cpu::CpuKernel& k) {
  std::string s;
  for (ir::DType t : k.dtypes) {
    if (!s.empty()) s += ' ';
    s += ir::dtype_name(t);
  }
  return s;
}

}  // namespace

void print_op_coverage() {
  struct Row {
    std::string op, since, grad, dev, types;
  };
  std::vector<Row> rows;
#define PIPETRAIN_OP_ROW(op)                           \
  if (!ir::OpRegistry::instance().find(#op)->internal) \
    rows.push_back(                                    \
        {#op, since_opset(#op), gradient(#op), device(#op), dtypes(exec::cpu::kernel_##op())});
  PIPETRAIN_OPS(PIPETRAIN_OP_ROW)
#undef PIPETRAIN_OP_ROW
  fmt::print(
      "{} ONNX operators (default domain; models of opset 11-21 import, older ones are "
      "converted to 11):\n",
      rows.size());
  fmt::print("  {:<24} {:>5}  {:<26} {:<22} {}\n", "op", "since", "gradient", "CUDA/portable",
             "CPU dtypes");
  for (const Row& r : rows)
    fmt::print("  {:<24} {:>5}  {:<26} {:<22} {}\n", r.op, r.since, r.grad, r.dev, r.types);
  fmt::print("{} more expanded at import into the ops above (gradients and kernels are theirs):\n",
             importer::expanded_ops().size());
  size_t width = 24;  // the preview training domain's ops carry their domain
  for (const auto& [op, e] : importer::expanded_ops()) width = std::max(width, op.size());
  for (const auto& [op, e] : importer::expanded_ops())
    fmt::print("  {:<{}} {:>5}  into {}\n", op, width, since_opset(op), e.into);
}

}  // namespace pipetrain::cli
