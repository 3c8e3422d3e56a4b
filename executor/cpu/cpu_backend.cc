#include <map>
#include <set>

#include <cblas.h>

#include "executor/backend.h"
#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/bf16.h"
#include "executor/cpu/kernels/blocked_layout.h"
#include "executor/cpu/kernels/cpu_threads.h"
#include "executor/cpu/kernels/kernel_paths.h"
#include "executor/device/bf16.h"
#include "executor/kernel_check.h"
#include "ir/error.h"

namespace pipetrain::exec {

namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options)
      : options_(options), avoided_(cpu::avoided_ops()) {
    // Ops whose own kernel the kernel check found wrong here run the portable backend's.
    if (options.portable_fallback && !avoided_.everywhere.empty())
      fallback_ = make_portable_backend();
#define PIPETRAIN_ADD_CPU_KERNEL(op) kernels_.emplace(#op, cpu::kernel_##op());
    PIPETRAIN_OPS(PIPETRAIN_ADD_CPU_KERNEL)
#undef PIPETRAIN_ADD_CPU_KERNEL
    if (bf16()) {
      if (!cpu::native_bf16())
        throw PlanError(
            "--precision bf16 on the cpu backend needs a CPU with AVX512-BF16 or AMX; oneDNN "
            "runs " +
            cpu::dnnl_isa_name() + " here (--backend portable emulates bf16, slowly)");
      bf16_kernels_ = {{"Gemm", cpu::kernel_bf16_Gemm()},
                       {"MatMul", cpu::kernel_bf16_MatMul()},
                       {"Conv", cpu::kernel_bf16_Conv()},
                       {"ConvGrad", cpu::kernel_bf16_ConvGrad()}};
    }
  }

  std::string name() const override {
    return bf16() ? "cpu-bf16" : "cpu";
  }

  std::string unsupported_reason(const ir::Graph& g, const ir::Node& n) const override {
    auto it = kernels_.find(n.op_type);
    if (it == kernels_.end()) return "no CPU kernel for op '" + n.op_type + "'";
    const cpu::CpuKernel& k = it->second;
    std::string tname;
    if (k.type_input >= 0 && n.has_input(static_cast<size_t>(k.type_input)))
      tname = n.inputs[static_cast<size_t>(k.type_input)];
    else if (n.has_output(0))
      tname = n.outputs[0];
    if (tname.empty() || !g.has_tensor(tname)) return "";
    ir::DType t = g.tensor(tname).dtype;
    for (ir::DType d : k.dtypes)
      if (d == t) return "";
    return "the CPU kernel for " + n.op_type + " does not support dtype " + ir::dtype_name(t);
  }

  bool output_is_view(const ir::Node& n) const override {
    // executor/cpu/kernels/shape_ops.cc: these return reshaped handles of their input.
    static const std::set<std::string> kViews = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                                 "Identity"};
    return kViews.count(n.op_type) != 0;
  }

  bool kernel_fills_outputs(const ir::Node& n) const override {
    // Kernels that write every output element (GEMM with beta = 0, elementwise
    // maps, row-wise normalisations). tests/autodiff/dirty_arena_test runs every
    // op of the gradient table on a NaN-poisoned arena to keep this list honest.
    static const std::set<std::string> kFills = {"Add",
                                                 "Sub",
                                                 "Mul",
                                                 "Div",
                                                 "Pow",
                                                 "Neg",
                                                 "Exp",
                                                 "Log",
                                                 "Sqrt",
                                                 "Reciprocal",
                                                 "Erf",
                                                 "Mod",
                                                 "And",
                                                 "Or",
                                                 "Xor",
                                                 "Sum",
                                                 "Mean",
                                                 "IsNaN",
                                                 "IsInf",
                                                 "Tan",
                                                 "Asin",
                                                 "Acos",
                                                 "Atan",
                                                 "Sinh",
                                                 "Cosh",
                                                 "Asinh",
                                                 "Acosh",
                                                 "Atanh",
                                                 "Relu",
                                                 "Sigmoid",
                                                 "HardSigmoid",
                                                 "Elu",
                                                 "Selu",
                                                 "Celu",
                                                 "ThresholdedRelu",
                                                 "Softplus",
                                                 "Softsign",
                                                 "Mish",
                                                 "Sin",
                                                 "Cos",
                                                 "Floor",
                                                 "Ceil",
                                                 "Round",
                                                 "Sign",
                                                 "HardSwish",
                                                 "HardSigmoidGrad",
                                                 "HardSwishGrad",
                                                 "Tanh",
                                                 "Gelu",
                                                 "Where",
                                                 "Transpose",
                                                 "Gemm",
                                                 "MatMul",
                                                 "Softmax",
                                                 "LogSoftmax",
                                                 "ReluGrad",
                                                 "SigmoidGrad",
                                                 "TanhGrad",
                                                 "GeluGrad",
                                                 "SoftmaxGrad",
                                                 "LogSoftmaxGrad",
                                                 "DropoutGrad",
                                                 "Expand",
                                                 "LayerNormalization",
                                                 "LayerNormalizationGrad",
                                                 "BatchNormalization",
                                                 "BatchNormalizationGrad",
                                                 "Conv",
                                                 "ConvGrad",
                                                 "MaxPool",
                                                 "MaxPoolGrad",
                                                 "AveragePool",
                                                 "GlobalAveragePool",
                                                 "ReduceSum",
                                                 "ReduceMean",
                                                 "ReduceMax",
                                                 "ReduceMin",
                                                 "ReduceProd",
                                                 "ReduceL1",
                                                 "ReduceL2",
                                                 "ReduceSumSquare",
                                                 "ReduceLogSum",
                                                 "ReduceLogSumExp",
                                                 "LeakyReluGrad",
                                                 "ClipGrad",
                                                 "Dropout",
                                                 "Concat",
                                                 "Split",
                                                 "SoftmaxCrossEntropyLossGrad",
                                                 "Attention",
                                                 "AttentionGrad"};
    return kFills.count(n.op_type) != 0;
  }

  bool kernel_accumulates(const ir::Node& n, size_t k) const override {
    // GEMMs add into their output with beta = 1 (executor/cpu/kernels/linalg.cc);
    // under bf16 each output is rounded by itself and the runner adds.
    return k == 0 && (n.op_type == "Gemm" || n.op_type == "MatMul") && !bf16();
  }

  // bf16 keeps activations row-major: the conversions to bf16 reorder anyway.
  LayoutAccess layout_access(const ir::Graph& g, const ir::Node& n) const override {
    if (avoided_.blocked.count(n.op_type) || avoided_.everywhere.count(n.op_type)) return {};
    return blocked() ? cpu::blocked_layout_access(g, n) : LayoutAccess{};
  }
  bool blockable(const ir::TensorDesc& t) const override {
    return blocked() && cpu::blockable(t);
  }

  void run(KernelContext& ctx) override {
    auto it = kernels_.find(ctx.n().op_type);
    if (it == kernels_.end())
      throw UnsupportedOp(ctx.n().describe() + ": no CPU kernel for this op");
    cpu::apply_dnnl_threads();  // oneDNN and OpenBLAS run on this thread's OpenMP team
    if (fallback_ && avoided_.everywhere.count(ctx.n().op_type)) return fallback_->run(ctx);
    if (bf16() && device::bf16_ops().count(ctx.n().op_type)) {
      auto b = bf16_kernels_.find(ctx.n().op_type);
      if (b != bf16_kernels_.end()) return b->second.fn(ctx);
      return cpu::run_on_rounded_copies(ctx, it->second.fn);  // LSTMs, ConvTranspose
    }
    it->second.fn(ctx);
    const bool blocked = ctx.blocked_inputs || ctx.blocked_outputs;
    if (ctx.has_out(0) && cpu::op_fault_injected(ctx.n().op_type, blocked))
      cpu::inject_error(ctx.out(0).data<float>(), ctx.out(0).numel());  // the check's tests
  }

 private:
  bool bf16() const {
    return options_.precision == Precision::kBf16;
  }
  bool blocked() const {
    return options_.blocked_layout && !bf16();
  }

  CpuBackendOptions options_;
  cpu::AvoidedOps avoided_;            // the kernel check's decisions when this backend was made
  std::unique_ptr<Backend> fallback_;  // the portable backend, for ops avoided everywhere
  std::map<std::string, cpu::CpuKernel> kernels_;
  std::map<std::string, cpu::CpuKernel> bf16_kernels_;  // under bf16: Gemm, MatMul, Conv, ConvGrad
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  ensure_kernel_check();  // once per process, before the first kernel runs
  return std::make_unique<CpuBackend>(options);
}

void set_cpu_threads(int threads) {
  openblas_set_num_threads(threads);
  cpu::set_dnnl_threads(threads);
}

}  // namespace pipetrain::exec
