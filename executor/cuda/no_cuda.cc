// Linked when the build has no nvcc: the CUDA entry points say so plainly.
#include "executor/backend.h"
#include "executor/comm/nccl_communicator.h"
#include "ir/error.h"

namespace pipetrain::exec {

std::unique_ptr<Backend> make_cuda_backend(int /*device*/, Precision /*precision*/) {
  throw RuntimeFault("pipetrain was built without CUDA (nvcc was not found at configure time)");
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, int, size_t) {
  throw RuntimeFault("pipetrain was built without CUDA (nvcc was not found at configure time)");
}

int cuda_device_count() {
  return 0;
}

}  // namespace pipetrain::exec
