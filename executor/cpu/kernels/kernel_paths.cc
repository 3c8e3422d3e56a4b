#include "executor/cpu/kernels/kernel_paths.h"

#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <sstream>

namespace pipetrain::exec::cpu {

namespace {

std::array<std::atomic<bool>, kKernelPathCount> g_avoided{};
std::array<std::atomic<bool>, kKernelPathCount> g_injected{};
std::atomic<bool> g_any_op_fault{false};  // skips the lock on every node run

struct OpState {
  std::mutex mu;
  AvoidedOps avoided;                                // guarded by mu
  std::set<std::string> injected, injected_blocked;  // guarded by mu
};

void parse_faults(const std::string& spec, OpState& s) {
  for (auto& f : g_injected) f = false;
  s.injected.clear();
  s.injected_blocked.clear();
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    bool path = false;
    for (int p = 0; p < kKernelPathCount; ++p)
      if (item == kernel_path_name(static_cast<KernelPath>(p))) g_injected[p] = path = true;
    if (path) continue;
    const std::string suffix = ":blocked";
    if (item.size() > suffix.size() &&
        item.compare(item.size() - suffix.size(), suffix.size(), suffix) == 0)
      s.injected_blocked.insert(item.substr(0, item.size() - suffix.size()));
    else
      s.injected.insert(item);
  }
  g_any_op_fault = !s.injected.empty() || !s.injected_blocked.empty();
}

OpState& state() {
  static OpState* s = [] {
    auto* st = new OpState;  // never destroyed: kernels may run during static destruction
    if (const char* env = std::getenv("PIPETRAIN_INJECT_KERNEL_FAULT")) parse_faults(env, *st);
    return st;
  }();
  return *s;
}

}  // namespace

const char* kernel_path_name(KernelPath p) {
  switch (p) {
    case KernelPath::kOpenBlasGemm: return "openblas-gemm";
    case KernelPath::kDnnlGemm: return "onednn-gemm";
    case KernelPath::kDnnlMatmul: return "onednn-matmul";
    case KernelPath::kDnnlConv: return "onednn-conv";
    case KernelPath::kDnnlConvGrad: return "onednn-conv-grad";
  }
  return "?";
}

bool path_avoided(KernelPath p) {
  state();  // reads the environment's faults first
  return g_avoided[static_cast<size_t>(p)].load(std::memory_order_relaxed);
}

void set_path_avoided(KernelPath p, bool avoided) {
  g_avoided[static_cast<size_t>(p)] = avoided;
}

AvoidedOps avoided_ops() {
  OpState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.avoided;
}

void avoid_op(const std::string& op, bool blocked_only) {
  OpState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  (blocked_only ? s.avoided.blocked : s.avoided.everywhere).insert(op);
}

void clear_avoided() {
  for (auto& a : g_avoided) a = false;
  OpState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.avoided = {};
}

bool fault_injected(KernelPath p) {
  state();
  return g_injected[static_cast<size_t>(p)].load(std::memory_order_relaxed);
}

bool op_fault_injected(const std::string& op, bool blocked) {
  OpState& s = state();
  if (!g_any_op_fault.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lock(s.mu);
  return s.injected.count(op) || (blocked && s.injected_blocked.count(op));
}

void set_injected_faults(const std::string& spec) {
  OpState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  parse_faults(spec, s);
}

void inject_error(float* y, int64_t n) {
  if (n <= 0) return;
  float& v = y[n / 2];
  v += 1.0f + std::fabs(v);
}

}  // namespace pipetrain::exec::cpu
