// rank_cores.cpp — see rank_cores.hpp.
#include "launch/rank_cores.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace cnnscale {

int rank_cores(const RankCpus& c) {
  int cores = c.affinity > 0 ? c.affinity : (c.online > 0 ? c.online : 1);
  if (c.slurm_cpus_per_task > 0) cores = std::min(cores, c.slurm_cpus_per_task);
  const int ranks = std::max(1, c.local_ranks);
  // Masks that cannot be disjoint: the node's cores are shared, each rank takes its part.
  if (c.online > 0 && static_cast<long>(cores) * ranks > c.online) cores = std::min(cores, c.online / ranks);
  return std::max(1, cores);
}

int gpu_default_data_threads(const RankCpus& c) { return std::max(1, rank_cores(c) - 1); }

RankCpus this_rank_cpus(int local_ranks, const EnvLookup& env) {
  RankCpus c;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) c.affinity = CPU_COUNT(&set);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  c.online = online > 0 ? static_cast<int>(online) : 0;
  if (auto v = env("SLURM_CPUS_PER_TASK"); v && !v->empty())
    c.slurm_cpus_per_task = static_cast<int>(parse_env_int("SLURM_CPUS_PER_TASK", *v));
  c.local_ranks = local_ranks;
  return c;
}

}  // namespace cnnscale
