// The f32 math the CPU kernels share with the CUDA kernels (executor/device).
#pragma once

#include "executor/device/hd.h"
#include "executor/device/math_f32.h"

namespace pipetrain::exec::cpu {

using device::erf_f32;
using device::erfc_f32;
using device::exp_f32;
using device::exp_f32_normal;
using device::select_f32;
using device::tanh_f32;

}  // namespace pipetrain::exec::cpu
