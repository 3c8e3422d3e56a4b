// Linked when the build has no nvcc: the CUDA entry points say so plainly.
#include "executor/backend.h"
#include "ir/error.h"

namespace pipetrain::exec {

std::unique_ptr<Backend> make_cuda_backend(int /*device*/) {
  throw RuntimeFault("pipetrain was built without CUDA (nvcc was not found at configure time)");
}

int cuda_device_count() {
  return 0;
}

}  // namespace pipetrain::exec
