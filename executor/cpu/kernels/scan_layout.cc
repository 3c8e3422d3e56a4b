// CPU kernels of ArgMax, ArgMin, TopK, CumSum, Trilu, Tile, GatherElements,
// ScatterElements, GatherND, ScatterND, Resize, ResizeGrad, GridSample and
// GridSampleGrad, RoiAlign and RoiAlignGrad: the shared implementations
// (device/ops_scan.h, ops_layout.h, ops_scatter.h, ops_resize.h) run by the host
// Exec, so every backend runs the same code for these.
#include "executor/cpu/cpu_kernels.h"
#include "executor/cpu/kernels/shared_kernel.h"
#include "executor/device/ops_grid_sample.h"
#include "executor/device/ops_layout.h"
#include "executor/device/ops_resize.h"
#include "executor/device/ops_roi_align.h"
#include "executor/device/ops_scan.h"
#include "executor/device/ops_scatter.h"

namespace pipetrain::exec::cpu {

namespace {

using device::HostExec;
using ir::DType;

const std::vector<DType> kNumbers = {DType::kF32, DType::kI64, DType::kI32};
const std::vector<DType> kAny = {DType::kF32, DType::kF16, DType::kBF16,
                                 DType::kI64, DType::kI32, DType::kBool};

}  // namespace

CpuKernel kernel_ArgMax() {
  return {shared_kernel<&device::arg_max_op<HostExec>>, kNumbers, 0};
}
CpuKernel kernel_ArgMin() {
  return {shared_kernel<&device::arg_min_op<HostExec>>, kNumbers, 0};
}
CpuKernel kernel_TopK() {
  return {shared_kernel<&device::top_k_op<HostExec>>, kNumbers, 0};
}
CpuKernel kernel_CumSum() {
  return {shared_kernel<&device::cum_sum_op<HostExec>>, kNumbers, 0};
}
CpuKernel kernel_Trilu() {
  return {shared_kernel<&device::trilu_op<HostExec>>, kAny, 0};
}
CpuKernel kernel_Tile() {
  return {shared_kernel<&device::tile_op<HostExec>>, kAny, 0};
}

CpuKernel kernel_GatherElements() {
  return {shared_kernel<&device::gather_elements_op<HostExec>>, kAny, 0};
}
CpuKernel kernel_ScatterElements() {
  return {shared_kernel<&device::scatter_elements_op<HostExec>>,
          {DType::kF32, DType::kI64, DType::kI32, DType::kBool},
          0};
}

CpuKernel kernel_GatherND() {
  return {shared_kernel<&device::gather_nd_op<HostExec>>, kAny, 0};
}
CpuKernel kernel_ScatterND() {
  return {shared_kernel<&device::scatter_nd_op<HostExec>>,
          {DType::kF32, DType::kI64, DType::kI32, DType::kBool},
          0};
}

CpuKernel kernel_GridSample() {
  return {shared_kernel<&device::grid_sample_op<HostExec>>, {DType::kF32}, 0};
}
CpuKernel kernel_GridSampleGrad() {
  return {shared_kernel<&device::grid_sample_grad_op<HostExec>>, {DType::kF32}, 0};
}

CpuKernel kernel_RoiAlign() {
  return {shared_kernel<&device::roi_align_op<HostExec>>, {DType::kF32}, 0};
}
CpuKernel kernel_RoiAlignGrad() {
  return {shared_kernel<&device::roi_align_grad_op<HostExec>>, {DType::kF32}, 0};
}

CpuKernel kernel_Hardmax() {
  return {shared_kernel<&device::hardmax_op<HostExec>>, {DType::kF32}, 0};
}
CpuKernel kernel_EyeLike() {
  return {shared_kernel<&device::eye_like_op<HostExec>>, kAny, 0};
}
CpuKernel kernel_OneHot() {
  return {shared_kernel<&device::one_hot_op<HostExec>>, kNumbers, 0};
}
CpuKernel kernel_Resize() {
  return {shared_kernel<&device::resize_op<HostExec>>, {DType::kF32}, 0};
}
CpuKernel kernel_ResizeGrad() {
  return {shared_kernel<&device::resize_grad_op<HostExec>>, {DType::kF32}, 0};
}

}  // namespace pipetrain::exec::cpu
