// Thread count of the CPU kernels' libraries. Debian's libdnnl and the
// OpenMP build of OpenBLAS that pipetrain links both run on the OpenMP
// runtime, whose count is a per-thread setting, so the process-wide value is
// stored here and applied on the calling thread before each kernel runs (a
// pipeline worker's thread would otherwise run them on every core). The
// kernels' own loops run on the same team through parallel_for.
#pragma once

#include <cstdint>
#include <type_traits>

namespace pipetrain::exec::cpu {

/// Sets the thread count oneDNN primitives use from now on, on every thread.
void set_dnnl_threads(int threads);
/// Applies the count set by set_dnnl_threads (if any) to the calling thread.
void apply_dnnl_threads();
/// The count oneDNN primitives created now on the calling thread plan for;
/// part of primitive cache keys, as a primitive keeps the count it was made with.
int dnnl_threads();

/// While alive, the calling thread's OpenMP work (oneDNN, OpenBLAS) runs on
/// that thread alone: for loops of many small GEMMs, where forking the team
/// for every call costs more than the other threads give back.
class OneThreadScope {
 public:
  OneThreadScope();
  ~OneThreadScope();
  OneThreadScope(const OneThreadScope&) = delete;
  OneThreadScope& operator=(const OneThreadScope&) = delete;

 private:
  int saved_ = 0;
};

/// Runs body(begin, end) over contiguous parts of [0, n) that cover it once,
/// on the calling thread's OpenMP team (set_dnnl_threads' count) when the loop
/// is worth forking for, else on the calling thread as body(0, n). `work` is
/// the loop's cost in element operations (n x the work of one index): parts
/// get at least parallel_min_work() of it, so a small kernel never pays for a
/// fork. Part boundaries fall on multiples of `align` indices: 16 by default,
/// so that a flat loop's parts start where one thread's loop would run its
/// vector body (16 floats or fewer a vector; an element in a scalar tail may
/// round otherwise) and write separate cache lines; row loops pass 1.
/// Iterations must be independent; each index then computes what it would on
/// one thread, so the results are bitwise those of one thread at any count
/// (rows stay whole, their reductions keep their order).
template <typename Body>
void parallel_for(int64_t n, int64_t work, Body&& body, int64_t align = 16);

/// Runs f(i) for every i in [0, n), split over threads (parallel_for): the
/// flat loops of the elementwise kernels.
template <typename F>
void for_each_index(int64_t n, int64_t cost_per_element, F f) {
  parallel_for(n, n * cost_per_element, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) f(i);
  });
}

/// The least work parallel_for gives a part (elements; 32,768 by default, about
/// the fork and join's cost in a memory-bound loop, or the environment's
/// PIPETRAIN_PARALLEL_MIN_WORK). Tests set it and the largest alignment to 1
/// so that small shapes split too.
int64_t parallel_min_work();
int64_t parallel_max_align();
void set_parallel_min_work(int64_t work, int64_t max_align = INT64_MAX);
/// How many loops parallel_for has split into parts so far (for tests).
int64_t parallel_forks();

namespace detail {
/// How many parts parallel_for cuts a loop of this work into (1: no fork).
int parallel_parts(int64_t n, int64_t work, int64_t align);
/// Runs fn(ctx, begin, end) over `parts` aligned parts of [0, n) in parallel.
void run_parts(int64_t n, int parts, int64_t align, void (*fn)(void*, int64_t, int64_t), void* ctx);
}  // namespace detail

template <typename Body>
void parallel_for(int64_t n, int64_t work, Body&& body, int64_t align) {
  if (n <= 0) return;
  const int parts = detail::parallel_parts(n, work, align);
  if (parts <= 1) {
    body(int64_t{0}, n);
    return;
  }
  using B = std::remove_reference_t<Body>;
  detail::run_parts(
      n, parts, align,
      [](void* ctx, int64_t begin, int64_t end) { (*static_cast<B*>(ctx))(begin, end); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

}  // namespace pipetrain::exec::cpu
