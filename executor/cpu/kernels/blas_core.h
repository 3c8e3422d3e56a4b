// OpenBLAS's kernel choice. Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks
// its kernels by CPU model number and falls back to its SSE3 "Prescott"
// kernels on models newer than it knows (Emerald Rapids, family 6 model 207,
// on this project's VMs): 33 GFLOP/s on one core where its SkylakeX kernels
// give 150. choose_blas_core() then picks by the CPU's instruction-set flags.
#pragma once

namespace pipetrain::exec::cpu {

/// When OpenBLAS took its Prescott fallback and OPENBLAS_CORETYPE is unset:
/// re-initialises it with SkylakeX (AVX-512 F/BW/DQ/VL), Haswell (AVX2 and
/// FMA) or Sandybridge (AVX) kernels, whichever the CPU supports. Must run
/// before any BLAS call and before other threads start (it runs before main).
void choose_blas_core();

/// Whether choose_blas_core replaced OpenBLAS's own choice.
bool blas_core_rechosen();

/// Puts OpenBLAS back on the kernels it chose itself (the kernel check's
/// fallback when the ones choose_blas_core chose compute wrong here). Only
/// while no other thread runs BLAS; false where there was nothing to undo.
bool restore_blas_core();

/// The kernel set OpenBLAS uses ("SkylakeX"), or "unknown".
const char* blas_core();

}  // namespace pipetrain::exec::cpu
