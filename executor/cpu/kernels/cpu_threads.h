// Thread count of the CPU kernels' libraries. OpenBLAS keeps one global
// count; Debian's libdnnl uses the OpenMP runtime, whose count is a
// per-thread setting, so the process-wide value is stored here and applied on
// the calling thread just before each oneDNN primitive runs.
#pragma once

namespace pipetrain::exec::cpu {

/// Sets the thread count oneDNN primitives use from now on, on every thread.
void set_dnnl_threads(int threads);
/// Applies the count set by set_dnnl_threads (if any) to the calling thread.
void apply_dnnl_threads();
/// The count oneDNN primitives created now on the calling thread plan for;
/// part of primitive cache keys, as a primitive keeps the count it was made with.
int dnnl_threads();

}  // namespace pipetrain::exec::cpu
