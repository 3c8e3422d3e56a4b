#include "executor/backend.h"
#include "ir/error.h"

namespace pipetrain::exec {

std::unique_ptr<Backend> make_backend(const std::string& name, int device, Precision precision) {
  if (name == "cpu") {
    CpuBackendOptions options;
    options.precision = precision;
    return make_cpu_backend(options);
  }
  if (name == "cuda") return make_cuda_backend(device, precision);
  if (name == "portable") return make_portable_backend(precision);
  throw PlanError("unknown backend '" + name + "' (cpu, cuda or portable)");
}

}  // namespace pipetrain::exec
