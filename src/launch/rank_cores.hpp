// rank_cores.hpp — the cores a rank may use, and from them the default --data-threads
// of a rank that trains on a GPU (issue 37 item 7).
//
// A CPU rank's cores go to oneDNN (--threads, OMP_NUM_THREADS; nn/threads.hpp) and its
// --data-threads default stays 1. A GPU rank computes on the device: its host cores have
// nothing to do but feed it, so by default every core the rank may use reads, decodes,
// augments and normalises batches, except one for the training thread (the host loop
// that enqueues each step and polls its loss; NCCL's proxy thread is not counted: it
// sleeps between collectives). Before this a 16-core H100 node fed ResNet-50 from JPEG
// with one thread. Not yet run on a GPU.
#pragma once
#include "util/env.hpp"

namespace cnnscale {

// What the default is computed from.
struct RankCpus {
  int affinity = 0;             // CPUs in the rank's affinity mask (sched_getaffinity); 0 = unknown
  int online = 0;               // CPUs online on the node (sysconf); 0 = unknown
  int slurm_cpus_per_task = 0;  // SLURM_CPUS_PER_TASK; 0 = not set
  int local_ranks = 1;          // ranks of the job on this node (ProcessContext::local_size)
};

// The cores this rank may use: its affinity mask, at most SLURM_CPUS_PER_TASK when that
// is set, and at most its share of the node (online / local_ranks) when the masks of the
// node's ranks cannot all be disjoint (affinity × local_ranks > online: mpirun
// --bind-to none, or binding to a socket, gives every rank the same mask). At least 1.
int rank_cores(const RankCpus& c);

// --data-threads' default on a rank that trains on a GPU: rank_cores(c) − 1 (the
// training thread), at least 1.
int gpu_default_data_threads(const RankCpus& c);

// This process's facts: sched_getaffinity, sysconf(_SC_NPROCESSORS_ONLN),
// SLURM_CPUS_PER_TASK from `env` (a malformed value is a UserError naming it), and the
// given local rank count.
RankCpus this_rank_cpus(int local_ranks, const EnvLookup& env = process_env());

}  // namespace cnnscale
