// Conv and ConvGrad on cuDNN (FMA math, the fastest deterministic algorithm
// cuDNN measures for each shape, once), for the windows cuDNN can express:
// 1-3 spatial axes, symmetric non-negative pads. The shared im2col path
// (device/ops_conv.h) runs the rest and ConvTranspose. nvcc only.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <map>
#include <vector>

#include "executor/cpu/kernels/conv_impl.h"
#include "executor/cuda/cuda_exec.h"

namespace pipetrain::exec::cuda {

/// The algorithm chosen for each convolution shape and direction: cuDNN times
/// its algorithms on the first call (cudnnFind*AlgorithmEx) and the fastest
/// deterministic one is kept. Asking cuDNN 9's heuristics on every call cost
/// more host time than the GPU spent on ResNet-50's convolutions, and its
/// first deterministic pick was often far from the fastest.
class ConvAlgorithms {
 public:
  struct Choice {
    bool found = false;  // false: no deterministic algorithm runs this shape
    int algo = 0;
    size_t workspace = 0;
  };
  /// The choice for key, or null before it is measured.
  const Choice* find(const std::vector<int>& key) const {
    auto it = choices_.find(key);
    return it == choices_.end() ? nullptr : &it->second;
  }
  void remember(const std::vector<int>& key, Choice c) { choices_[key] = c; }

 private:
  std::map<std::vector<int>, Choice> choices_;
};

/// a.y = conv(a.x, a.w) + a.b on the exec's stream; false (nothing written)
/// when cuDNN cannot express a's window or has no deterministic algorithm.
bool cudnn_conv(CudaExec& ex, cudnnHandle_t h, ConvAlgorithms& algos, const cpu::ConvArgs& a);

/// dX, dW, dB (each when non-null) of the Conv a describes, from dY; false
/// (nothing written) as cudnn_conv.
bool cudnn_conv_grad(CudaExec& ex, cudnnHandle_t h, ConvAlgorithms& algos, const cpu::ConvArgs& a,
                     const float* dy, float* dx, float* dw, float* db);

}  // namespace pipetrain::exec::cuda
