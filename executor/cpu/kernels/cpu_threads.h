// Thread count of the CPU kernels' libraries. Debian's libdnnl and the
// OpenMP build of OpenBLAS that pipetrain links both run on the OpenMP
// runtime, whose count is a per-thread setting, so the process-wide value is
// stored here and applied on the calling thread before each kernel runs (a
// pipeline worker's thread would otherwise run them on every core).
#pragma once

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

}  // namespace pipetrain::exec::cpu
