// PLACEHOLDER: replaced by the real kernels of this family.
#include "executor/cpu/cpu_kernels.h"

namespace pipetrain::exec::cpu {

CpuKernel kernel_Add() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Sub() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Mul() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Div() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Pow() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Equal() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Less() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Greater() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Max() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Min() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Sqrt() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Neg() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Exp() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Log() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Reciprocal() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Abs() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Erf() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Not() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Where() { return {[](KernelContext&) {}, {}, 0}; }
CpuKernel kernel_Cast() { return {[](KernelContext&) {}, {}, 0}; }

}  // namespace pipetrain::exec::cpu
