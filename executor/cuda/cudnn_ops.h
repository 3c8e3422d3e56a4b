// Softmax, LogSoftmax, MaxPool and AveragePool (forward and gradient) on
// cuDNN, where it expresses the op exactly; each returns false (nothing
// written) otherwise, and the shared kernels (executor/device) run it. nvcc only.
#pragma once

#include <cudnn.h>

#include "executor/cuda/cuda_exec.h"
#include "executor/device/device_op.h"

namespace pipetrain::exec::cuda {

/// Softmax / LogSoftmax (`log`) along the node's axis; false when a dimension
/// or the element count exceeds cuDNN's int range.
bool cudnn_softmax(CudaExec& ex, cudnnHandle_t h, device::DeviceOpArgs& a, bool log);
/// SoftmaxGrad / LogSoftmaxGrad: dX from (dY, Y).
bool cudnn_softmax_grad(CudaExec& ex, cudnnHandle_t h, device::DeviceOpArgs& a, bool log);

/// MaxPool (without the Indices output) and AveragePool with 1-3 spatial axes,
/// symmetric pads, no dilation and the IR's output size under cuDNN's
/// floor rule; false otherwise.
bool cudnn_pool(CudaExec& ex, cudnnHandle_t h, device::DeviceOpArgs& a);
/// MaxPoolGrad (dY, X) and AveragePoolGrad (dY) under the same conditions.
bool cudnn_pool_grad(CudaExec& ex, cudnnHandle_t h, device::DeviceOpArgs& a);

}  // namespace pipetrain::exec::cuda
