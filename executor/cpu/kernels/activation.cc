// PLACEHOLDER: replaced by the real kernels of this family.
#include "executor/cpu/cpu_kernels.h"

namespace pipetrain::exec::cpu {

CpuKernel kernel_Relu() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_LeakyRelu() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Sigmoid() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Tanh() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Gelu() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Clip() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Softmax() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_LogSoftmax() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Dropout() { return {[](KernelContext&) {}, {}, 0}; }

}  // namespace pipetrain::exec::cpu
