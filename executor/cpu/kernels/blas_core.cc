#include "executor/cpu/kernels/blas_core.h"

#include <cstdlib>
#include <cstring>

// Weak: a build of OpenBLAS without DYNAMIC_ARCH has no runtime choice to fix.
extern "C" {
char* openblas_get_corename(void) __attribute__((weak));
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace pipetrain::exec::cpu {

namespace {

const char* best_core_for_flags() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  if (__builtin_cpu_supports("avx")) return "Sandybridge";
  return nullptr;
}

bool g_rechosen = false;

}  // namespace

bool blas_core_rechosen() {
  return g_rechosen;
}

void choose_blas_core() {
  if (!openblas_get_corename || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;
  if (std::getenv("OPENBLAS_CORETYPE")) return;  // the user's choice stands
  const char* now = openblas_get_corename();
  if (!now || std::strcmp(now, "Prescott") != 0) return;
  const char* best = best_core_for_flags();
  if (!best) return;
  // gotoblas_dynamic_init reads OPENBLAS_CORETYPE; the variable is removed
  // again so that child processes detect for themselves.
  setenv("OPENBLAS_CORETYPE", best, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  g_rechosen = true;
}

bool restore_blas_core() {
  if (!g_rechosen) return false;
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();  // OPENBLAS_CORETYPE is unset again: OpenBLAS detects for itself
  g_rechosen = false;
  return true;
}

const char* blas_core() {
  const char* name = openblas_get_corename ? openblas_get_corename() : nullptr;
  return name ? name : "unknown";
}

}  // namespace pipetrain::exec::cpu
