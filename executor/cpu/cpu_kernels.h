// The CPU kernel table: one kernel per op in ir/op_list.h, each defined in
// executor/cpu/kernels/<family>.cc.
#pragma once

#include <vector>

#include "executor/kernel_context.h"
#include "ir/dtype.h"
#include "ir/op_list.h"

namespace pipetrain::exec::cpu {

using KernelFn = void (*)(KernelContext&);

struct CpuKernel {
  KernelFn fn = nullptr;
  /// dtypes the kernel accepts for its type-deciding tensor: input `type_input`
  /// (or output 0 when the op has no inputs, type_input = -1).
  std::vector<ir::DType> dtypes;
  int type_input = 0;
};

#define PIPETRAIN_DECLARE_CPU_KERNEL(op) CpuKernel kernel_##op();
PIPETRAIN_OPS(PIPETRAIN_DECLARE_CPU_KERNEL)
#undef PIPETRAIN_DECLARE_CPU_KERNEL

}  // namespace pipetrain::exec::cpu
