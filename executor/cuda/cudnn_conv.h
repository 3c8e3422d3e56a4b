// Conv and ConvGrad on cuDNN (FMA math, deterministic algorithms, cuDNN's
// ranking of them), for the windows cuDNN can express: 1-3 spatial axes,
// symmetric non-negative pads. The shared im2col path (device/ops_conv.h)
// runs the rest and ConvTranspose. nvcc only.
#pragma once

#include <cudnn.h>

#include "executor/cpu/kernels/conv_impl.h"
#include "executor/cuda/cuda_exec.h"

namespace pipetrain::exec::cuda {

/// a.y = conv(a.x, a.w) + a.b on the exec's stream; false (nothing written)
/// when cuDNN cannot express a's window or has no deterministic algorithm.
bool cudnn_conv(CudaExec& ex, cudnnHandle_t h, const cpu::ConvArgs& a);

/// dX, dW, dB (each when non-null) of the Conv a describes, from dY; false
/// (nothing written) as cudnn_conv.
bool cudnn_conv_grad(CudaExec& ex, cudnnHandle_t h, const cpu::ConvArgs& a, const float* dy,
                     float* dx, float* dw, float* db);

}  // namespace pipetrain::exec::cuda
