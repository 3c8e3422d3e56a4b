#include "executor/cpu/kernels/blas_core.h"

#include <cstdlib>
#include <cstring>

// Weak: a build of OpenBLAS without DYNAMIC_ARCH reports no kernel set.
extern "C" {
char* openblas_get_corename(void) __attribute__((weak));
}

namespace pipetrain::exec::cpu {

bool openblas_fell_back() {
  static const bool fell_back = [] {
    if (std::getenv("OPENBLAS_CORETYPE")) return false;  // the user's choice stands
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && std::strcmp(blas_core(), "Prescott") == 0;
  }();
  return fell_back;
}

const char* blas_core() {
  const char* name = openblas_get_corename ? openblas_get_corename() : nullptr;
  return name ? name : "unknown";
}

}  // namespace pipetrain::exec::cpu
