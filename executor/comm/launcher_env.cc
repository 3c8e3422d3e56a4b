// What the MPI launcher (Open MPI, MPICH/Hydra, Slurm's PMI) told this process
// through its environment: readable in every build, MPI or not, so that a
// build without MPI still refuses `mpirun ... pipetrain train` clearly.
#include <cstdlib>

#include "executor/comm/mpi_communicator.h"

namespace pipetrain::exec {

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : 0;
}

}  // namespace

int mpi_launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (int n = env_int(name); n > 0) return n;
  return 0;
}

int mpi_local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"})
    if (std::getenv(name)) return env_int(name);
  return 0;
}

int mpi_local_size() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (int n = env_int(name); n > 0) return n;
  return 1;
}

}  // namespace pipetrain::exec
