// PLACEHOLDER: replaced by the real kernels of this family.
#include "executor/cpu/cpu_kernels.h"

namespace pipetrain::exec::cpu {

CpuKernel kernel_Flatten() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Reshape() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Transpose() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Concat() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Split() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Slice() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Gather() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Squeeze() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Unsqueeze() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Expand() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Pad() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Identity() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Shape() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Constant() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_ConstantOfShape() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Range() { return {[](KernelContext&) {}, {}, 0}; }

}  // namespace pipetrain::exec::cpu
