// cuDNN descriptors freed on scope exit, for the cuDNN paths of the CUDA
// backend (cudnn_conv, cudnn_ops). nvcc only.
#pragma once

#include <cudnn.h>

#include <string>
#include <vector>

#include "executor/cuda/cuda_check.h"

namespace pipetrain::exec::cuda {

/// Row-major (packed) strides of dims.
inline std::vector<int> packed_strides(const std::vector<int>& dims) {
  std::vector<int> s(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) s[d - 1] = s[d] * dims[d];
  return s;
}

/// A float tensor descriptor of packed dims (at least 4, as cuDNN wants).
class TensorDesc {
 public:
  explicit TensorDesc(std::vector<int> dims) {
    while (dims.size() < 4) dims.push_back(1);
    PIPETRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_));
    const cudnnStatus_t st =
        cudnnSetTensorNdDescriptor(d_, CUDNN_DATA_FLOAT, static_cast<int>(dims.size()), dims.data(),
                                   packed_strides(dims).data());
    if (st != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyTensorDescriptor(d_);
      throw RuntimeFault(std::string("cudnnSetTensorNdDescriptor failed: ") +
                         cudnnGetErrorString(st));
    }
  }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  operator cudnnTensorDescriptor_t() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

}  // namespace pipetrain::exec::cuda
