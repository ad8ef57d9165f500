// nccl_id.cpp — see nccl_id.hpp.
#include "comm/cuda/nccl_id.hpp"

#include "comm/cuda/nccl_check.hpp"
#include "launch/mpi_check.hpp"

namespace cnnscale {

ncclUniqueId broadcast_nccl_unique_id(MPI_Comm comm) {
  ncclUniqueId id{};
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) ncclCheck(ncclGetUniqueId(&id));
  mpiCheck(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm));
  // Some MPI stacks (HCOLL's broadcast in HPC-X) complete a broadcast on the non-root
  // ranks only while the root makes further MPI calls; ncclCommInitRank, which comes
  // next, makes none, so without this the job can hang at start-up.
  mpiCheck(MPI_Barrier(comm));
  return id;
}

}  // namespace cnnscale
