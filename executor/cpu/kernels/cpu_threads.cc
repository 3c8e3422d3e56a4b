#include "executor/cpu/kernels/cpu_threads.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

#include <oneapi/dnnl/dnnl_config.h>
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif

namespace pipetrain::exec::cpu {

namespace {
std::atomic<int> g_dnnl_threads{0};  // 0: the runtime's default
// PIPETRAIN_PARALLEL_MIN_WORK overrides the default (a large value keeps
// every loop of the kernels on the calling thread: for A/B measurements).
int64_t initial_min_work() {
  const char* env = std::getenv("PIPETRAIN_PARALLEL_MIN_WORK");
  const long long v = env ? std::atoll(env) : 0;
  return v > 0 ? static_cast<int64_t>(v) : 32768;
}
std::atomic<int64_t> g_min_work{initial_min_work()};
std::atomic<int64_t> g_forks{0};
std::atomic<int64_t> g_max_align{INT64_MAX};
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

int64_t parallel_min_work() {
  return g_min_work.load(std::memory_order_relaxed);
}

void set_parallel_min_work(int64_t work, int64_t max_align) {
  g_min_work.store(std::max<int64_t>(work, 1));
  g_max_align.store(std::max<int64_t>(max_align, 1));
}

int64_t parallel_max_align() {
  return g_max_align.load(std::memory_order_relaxed);
}

int64_t parallel_forks() {
  return g_forks.load(std::memory_order_relaxed);
}

namespace detail {

int parallel_parts(int64_t n, int64_t work, int64_t align) {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  align = std::min(align, parallel_max_align());
  const int64_t min_work = parallel_min_work();
  // The calling thread's count: apply_dnnl_threads' (the backends apply it
  // before each kernel), or 1 inside a OneThreadScope.
  if (work < 2 * min_work || n < 2 * align || omp_in_parallel()) return 1;
  const int64_t by_work = work / min_work, by_size = n / align;
  return static_cast<int>(std::min<int64_t>({omp_get_max_threads(), by_work, by_size}));
#else
  (void)n, (void)work, (void)align;
  return 1;
#endif
}

void run_parts(int64_t n, int parts, int64_t align, void (*fn)(void*, int64_t, int64_t),
               void* ctx) {
  align = std::min(align, parallel_max_align());
  const int64_t blocks = (n + align - 1) / align;
  g_forks.fetch_add(1, std::memory_order_relaxed);
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#pragma omp parallel num_threads(parts)
  {
    // The team may be smaller than asked for; its parts still cover [0, n).
    const int64_t k = omp_get_thread_num(), team = omp_get_num_threads();
    const int64_t begin = std::min(n, blocks * k / team * align);
    const int64_t end = std::min(n, blocks * (k + 1) / team * align);
    if (begin < end) fn(ctx, begin, end);
  }
#else
  (void)parts, (void)blocks;
  fn(ctx, 0, n);
#endif
}

}  // namespace detail

}  // namespace pipetrain::exec::cpu
