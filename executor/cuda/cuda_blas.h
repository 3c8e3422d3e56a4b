// Gemm and MatMul on cuBLAS (row-major operands through the column-major
// identity Y^T = B^T A^T). nvcc only.
#pragma once

#include "executor/cuda/cuda_exec.h"
#include "executor/device/device_op.h"

namespace pipetrain::exec::cuda {

void gemm_op(CudaExec& ex, device::DeviceOpArgs& a);
void matmul_op(CudaExec& ex, device::DeviceOpArgs& a);

}  // namespace pipetrain::exec::cuda
