#include "executor/backend.h"
#include "ir/error.h"

namespace pipetrain::exec {

std::unique_ptr<Backend> make_backend(const std::string& name, int device, Precision precision) {
  if (name == "cpu") {
    if (precision != Precision::kFp32)
      throw PlanError("bf16 mixed precision runs on --backend cuda (or portable, its CPU twin)");
    return make_cpu_backend();
  }
  if (name == "cuda") return make_cuda_backend(device, precision);
  if (name == "portable") return make_portable_backend(precision);
  throw PlanError("unknown backend '" + name + "' (cpu, cuda or portable)");
}

}  // namespace pipetrain::exec
