// launch_info.hpp — what the launcher told this process about itself, before MPI.
#pragma once
#include <string>

namespace cnnscale {

// torchrun: RANK/WORLD_SIZE (+ MASTER_ADDR/MASTER_PORT); tfconfig: TF_CONFIG's cluster and task.
// Both start processes that share no MPI job: they meet at the rendezvous store.
enum class LauncherKind { pmix, slurm, mpirun, torchrun, tfconfig, none };

const char* launcher_kind_name(LauncherKind k);

// Fields are -1 where the launcher does not say.
struct LaunchInfo {
  LauncherKind kind = LauncherKind::none;
  std::string name = "none";     // e.g. "srun+pmix", "mpirun+pmix", "slurm", "torchrun"
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = -1;
  int node_id = -1;
  int num_nodes = -1;
  std::string job_id;            // SLURM_JOB_ID when under Slurm
  std::string gpus;              // SLURM_STEP_GPUS / SLURM_JOB_GPUS
  std::string rank_var;          // the variable the rank came from, for messages
  std::string size_var;          // the variable the size came from
  bool has_pmi = false;          // some PMI (PMIx or PMI-2) server is reachable
  // Where the rendezvous store is (torchrun: MASTER_ADDR/MASTER_PORT; TF_CONFIG: the
  // first worker's address); empty/0 where the launcher does not say.
  std::string store_addr;
  int store_port = 0;
  std::string store_what;        // where they came from, for messages
};

}  // namespace cnnscale
