// nccl_id.hpp — the NCCL bootstrap step that needs no GPU: rank 0 calls
// ncclGetUniqueId and MPI_Bcast gives every rank the same id bytes.
// Only available in the CUDA build (CNNSCALE_HAVE_CUDA).
#pragma once
#ifdef CNNSCALE_HAVE_CUDA
#include <mpi.h>
#include <nccl.h>

namespace cnnscale {

ncclUniqueId broadcast_nccl_unique_id(MPI_Comm comm);

// "2.28.x" from ncclGetVersion.
const char* nccl_version_string();

}  // namespace cnnscale
#endif
