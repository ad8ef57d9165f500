// detect_launcher.hpp — decides from the environment alone who launched us.
//
// Precedence: PMIx (PMIX_NAMESPACE+PMIX_RANK) > Slurm step (SLURM_PROCID) >
// Open MPI mpirun (OMPI_COMM_WORLD_*) > torchrun (RANK/WORLD_SIZE) > single process.
// Slurm variables are ignored when OMPI_COMM_WORLD_RANK is set: that is mpirun inside
// an allocation, and SLURM_PROCID then describes the batch shell, not this process.
// Malformed or inconsistent values throw UserError naming the variable.
#pragma once
#include "launch/launch_info.hpp"
#include "util/env.hpp"

namespace cnnscale {

LaunchInfo detect_launcher(const EnvLookup& env);

// Checks that rank < size, local_rank < local_size, node_id < num_nodes; throws UserError.
void validate_launch_info(const LaunchInfo& info);

// The classic srun-without-PMI failure, decided before MPI_Init: a Slurm step of
// several tasks with no PMIx/PMI-2 variables in the environment. Throws UserError.
void check_pmi_available(const LaunchInfo& info);

}  // namespace cnnscale
