// Linked when the build has no MPI (-DPIPETRAIN_MPI=OFF, or Open MPI not
// found): the mpi communicator says so plainly.
#include "executor/comm/mpi_communicator.h"
#include "ir/error.h"

namespace pipetrain::exec {

std::unique_ptr<Communicator> make_mpi_communicator(size_t, std::chrono::milliseconds) {
  throw RuntimeFault(
      "pipetrain was built without MPI (--comm mpi and nccl need it: install Open MPI and "
      "rebuild)");
}

}  // namespace pipetrain::exec
