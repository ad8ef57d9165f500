// pmix_query.hpp — asks the PMIx server (srun --mpi=pmix, or mpirun) for the job
// size, this process's local rank, local size and node id, before MPI_Init.
#pragma once
#include "launch/launch_info.hpp"

namespace cnnscale {

// Fills size/local_rank/local_size/node_id from PMIx_Get; throws UserError if the
// PMIx server cannot be reached although PMIX_* variables are set.
void query_pmix(LaunchInfo& info);

// Drops this module's PMIx reference. Call after MPI_Init: finalising PMIx before
// MPI_Init would tear down the client connection MPI is about to reuse.
void release_pmix();

}  // namespace cnnscale
