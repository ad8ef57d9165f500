// nccl_id.hpp — the NCCL bootstrap step that needs no GPU: rank 0 calls
// ncclGetUniqueId and MPI_Bcast gives every rank the same id bytes.
// CUDA build only.
#pragma once
#include <mpi.h>
#include <nccl.h>

namespace cnnscale {

ncclUniqueId broadcast_nccl_unique_id(MPI_Comm comm);

}  // namespace cnnscale
