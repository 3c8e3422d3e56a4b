// Device specs for analytic profiles: a roofline per op needs only the peak
// FLOP/s and the memory bandwidth. Specs for V100, A100 and H100 are compiled
// in (published SXM figures); "local-cpu" is measured on this machine.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipetrain::partitioner {

struct DeviceSpec {
  std::string name;
  double peak_fp32_flops = 0;    // FLOP/s, plain fp32 (CUDA cores / SIMD)
  double peak_tf32_flops = 0;    // FLOP/s on tensor cores in TF32; 0 when the device has none
  double memory_bandwidth = 0;   // bytes/s (HBM or DRAM)
  double memory_bytes = 0;       // device memory
  double kernel_overhead_s = 0;  // fixed cost per node (launch latency)
};

/// "v100", "a100", "h100" or "local-cpu" (measured once per process, about
/// 0.3 s). Throws PlanError listing the known names otherwise.
DeviceSpec device_spec(const std::string& name);
/// The compiled-in GPU specs.
std::vector<DeviceSpec> builtin_device_specs();
/// Times an OpenBLAS SGEMM (1024^2) and a 64 MiB memcpy on this machine.
DeviceSpec measure_local_cpu();

nlohmann::json to_json(const DeviceSpec& d);
DeviceSpec device_spec_from_json(const nlohmann::json& j);

}  // namespace pipetrain::partitioner
