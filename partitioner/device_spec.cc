#include "partitioner/device_spec.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "ir/error.h"
#include "partitioner/json_util.h"

namespace pipetrain::partitioner {

std::vector<DeviceSpec> builtin_device_specs() {
  // NVIDIA datasheets, SXM boards, dense (no sparsity) figures:
  //   V100 SXM2 32 GB: 15.7 TFLOP/s fp32, no TF32, 900 GB/s HBM2.
  //   A100 SXM4 40 GB: 19.5 TFLOP/s fp32, 156 TFLOP/s TF32, 1555 GB/s HBM2.
  //   H100 SXM5 80 GB: 67 TFLOP/s fp32, 494.7 TFLOP/s TF32, 3.35 TB/s HBM3.
  // Launch latency ~5 us per kernel on all three.
  return {
      {"v100", 15.7e12, 0.0, 900e9, 32e9, 5e-6},
      {"a100", 19.5e12, 156e12, 1555e9, 40e9, 5e-6},
      {"h100", 67e12, 494.7e12, 3.35e12, 80e9, 5e-6},
  };
}

DeviceSpec measure_local_cpu() {
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  DeviceSpec d;
  d.name = "local-cpu";
  const int n = 1024;
  std::vector<float> a(size_t(n) * n, 1.0f), b(size_t(n) * n, 0.5f), c(size_t(n) * n, 0.0f);
  // Warm-up, then the best of 3: peak, not average, is what a roofline wants.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
              0.0f, c.data(), n);
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    auto t0 = clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    best = std::min(best, seconds(t0, clock::now()));
  }
  d.peak_fp32_flops = 2.0 * n * n * n / std::max(best, 1e-9);
  const size_t bytes = size_t(64) << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::memcpy(dst.data(), src.data(), bytes);
  best = 1e30;
  for (int r = 0; r < 3; ++r) {
    auto t0 = clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    best = std::min(best, seconds(t0, clock::now()));
  }
  // A copy reads and writes every byte.
  d.memory_bandwidth = 2.0 * double(bytes) / std::max(best, 1e-9);
  d.memory_bytes = 0;
  return d;
}

DeviceSpec device_spec(const std::string& name) {
  if (name == "local-cpu") {
    static const DeviceSpec measured = measure_local_cpu();
    return measured;
  }
  std::string known;
  for (const auto& d : builtin_device_specs()) {
    if (d.name == name) return d;
    known += d.name + ", ";
  }
  throw PlanError("unknown device '" + name + "' (known: " + known + "local-cpu)");
}

nlohmann::json to_json(const DeviceSpec& d) {
  return {{"name", d.name},
          {"peak_fp32_flops", d.peak_fp32_flops},
          {"peak_tf32_flops", d.peak_tf32_flops},
          {"memory_bandwidth", d.memory_bandwidth},
          {"memory_bytes", d.memory_bytes},
          {"kernel_overhead_s", d.kernel_overhead_s}};
}

DeviceSpec device_spec_from_json(const nlohmann::json& j) {
  namespace ju = json_util;
  const std::string w = "device spec";
  DeviceSpec d;
  d.name = ju::string(j, "name", w);
  d.peak_fp32_flops = ju::number(j, "peak_fp32_flops", w);
  d.peak_tf32_flops = ju::number_or(j, "peak_tf32_flops", 0, w);
  d.memory_bandwidth = ju::number(j, "memory_bandwidth", w);
  d.memory_bytes = ju::number_or(j, "memory_bytes", 0, w);
  d.kernel_overhead_s = ju::number_or(j, "kernel_overhead_s", 0, w);
  if (d.peak_fp32_flops <= 0 || d.memory_bandwidth <= 0)
    throw PlanError("device spec '" + d.name +
                    "': peak_fp32_flops and memory_bandwidth must be > 0");
  return d;
}

}  // namespace pipetrain::partitioner
