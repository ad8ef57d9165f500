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
  return id;
}

}  // namespace cnnscale
