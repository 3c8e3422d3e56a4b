// OpenBLAS's kernel choice. Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks
// its kernels by CPU model number and falls back to its SSE3 "Prescott"
// kernels on models newer than it knows (Emerald Rapids, family 6 model 207,
// on this project's VMs): 34 GFLOP/s on one AVX-512 core, where oneDNN's
// sgemm gives 124 and OpenBLAS's own SkylakeX kernels 127 on a model it knows
// (1024^3, 2026-12-06). pipetrain does not override the library's choice (a
// kernel set OpenBLAS did not choose is one its authors never ran on that
// CPU: issue 53); where OpenBLAS fell back, blas_sgemm (sgemm.h) runs the
// products on oneDNN's sgemm instead. OPENBLAS_CORETYPE, where set, stands.
#pragma once

namespace pipetrain::exec::cpu {

/// True when OpenBLAS runs its Prescott fallback on a CPU with AVX and
/// OPENBLAS_CORETYPE is unset: its GEMMs then go to oneDNN's sgemm.
bool openblas_fell_back();

/// The kernel set OpenBLAS uses ("SkylakeX"), or "unknown".
const char* blas_core();

}  // namespace pipetrain::exec::cpu
