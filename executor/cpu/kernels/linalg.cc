// PLACEHOLDER: replaced by the real kernels of this family.
#include "executor/cpu/cpu_kernels.h"

namespace pipetrain::exec::cpu {

CpuKernel kernel_Gemm() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_MatMul() { return {[](KernelContext&) {}, {}, 0}; }

}  // namespace pipetrain::exec::cpu
