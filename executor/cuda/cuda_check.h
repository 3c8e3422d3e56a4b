// Error checks for CUDA runtime, cuBLAS and cuDNN calls: a failure becomes a
// RuntimeFault naming the call and the library's own message.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "ir/error.h"

#define PIPETRAIN_CUDA_CHECK(call)                                             \
  do {                                                                         \
    const cudaError_t err_ = (call);                                           \
    if (err_ != cudaSuccess)                                                   \
      throw ::pipetrain::RuntimeFault(std::string(#call) +                     \
                                      " failed: " + cudaGetErrorString(err_)); \
  } while (0)

#define PIPETRAIN_CUBLAS_CHECK(call)                                             \
  do {                                                                           \
    const cublasStatus_t st_ = (call);                                           \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                            \
      throw ::pipetrain::RuntimeFault(std::string(#call) +                       \
                                      " failed: " + cublasGetStatusString(st_)); \
  } while (0)

#define PIPETRAIN_CUDNN_CHECK(call)                                            \
  do {                                                                         \
    const cudnnStatus_t st_ = (call);                                          \
    if (st_ != CUDNN_STATUS_SUCCESS)                                           \
      throw ::pipetrain::RuntimeFault(std::string(#call) +                     \
                                      " failed: " + cudnnGetErrorString(st_)); \
  } while (0)
