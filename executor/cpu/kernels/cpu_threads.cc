#include "executor/cpu/kernels/cpu_threads.h"

#include <atomic>

#include <oneapi/dnnl/dnnl_config.h>
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif

namespace pipetrain::exec::cpu {

namespace {
std::atomic<int> g_dnnl_threads{0};  // 0: the runtime's default
}  // namespace

void set_dnnl_threads(int threads) {
  g_dnnl_threads.store(threads > 0 ? threads : 0);
  apply_dnnl_threads();
}

void apply_dnnl_threads() {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  int want = g_dnnl_threads.load(std::memory_order_relaxed);
  if (want > 0 && omp_get_max_threads() != want) omp_set_num_threads(want);
#endif
}

int dnnl_threads() {
  apply_dnnl_threads();
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  return omp_get_max_threads();
#else
  return g_dnnl_threads.load(std::memory_order_relaxed);
#endif
}

OneThreadScope::OneThreadScope() {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  saved_ = omp_get_max_threads();
  if (saved_ != 1) omp_set_num_threads(1);
#endif
}

OneThreadScope::~OneThreadScope() {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  if (saved_ != 1) omp_set_num_threads(saved_);
#endif
}

}  // namespace pipetrain::exec::cpu
