#include "executor/backend.h"
#include "ir/error.h"

namespace pipetrain::exec {

std::unique_ptr<Backend> make_backend(const std::string& name, int device) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") return make_cuda_backend(device);
  if (name == "portable") return make_portable_backend();
  throw PlanError("unknown backend '" + name + "' (cpu, cuda or portable)");
}

}  // namespace pipetrain::exec
