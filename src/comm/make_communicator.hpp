// make_communicator.hpp — picks and builds the communicator for --backend. gloo: Gloo on
// the CPU, the ranks met at a rendezvous store (start_world decides: torchrun-style
// variables, TF_CONFIG). auto: NCCL when this build has CUDA and every rank is bound to a
// GPU of its own, else the host (MPI, or Gloo for ranks that met at a rendezvous store),
// with a warning (rank 0, once) when some node looks as if it had GPUs
// (/dev/nvidiaN, SLURM_*_GPUS, CUDA_VISIBLE_DEVICES) and the reason CUDA gave none.
// Two ranks on one GPU never get this far: launch's device binding refuses them
// (launch/device_binding.hpp; NCCL rejects two ranks on one device).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "launch/bootstrap.hpp"

namespace cnnscale {

Backend parse_backend(const std::string& s);  // throws UserError on anything else

// What decide_backend needs, the same on every rank (resolve_backend gathers it).
struct BackendFacts {
  int rank = 0;  // this process's rank (of a CollectiveError, rank 0 prints)
  bool built_with_cuda = false;
  int rank_without_gpu = -1;  // lowest rank bound to no GPU; -1 when every rank has one
  std::string its_host;       // that rank's host
  std::string its_problem;    // its ProcessContext::gpu_problem (the CUDA error, versions, fix)
  int rank_with_hints = -1;   // lowest rank with GPU-presence hints; -1: none
  std::string hints;          // its hints (launch/gpu_diagnosis.hpp join_hints)
  std::string hints_host;
  // The ranks met at a rendezvous store (torchrun-style, TF_CONFIG): the CPU backend is
  // gloo, not mpi (decide_backend returns gloo where it would return mpi).
  bool rendezvous = false;
  // The request came as `--device cuda` (with --backend auto), not as --backend nccl: the
  // errors name the switch the user typed and the way to the CPU (--device cpu).
  bool device_cuda = false;
};

// One rank's contribution to BackendFacts, as exchanged through the rendezvous store.
struct RankGpuFacts {
  std::string host;
  bool no_gpu = false;
  std::string problem;  // why no GPU
  std::string hints;    // "" when none
};
// The facts of all ranks (indexed by rank) combined as resolve_backend does over MPI:
// lowest rank without a GPU, with hints. Pure.
BackendFacts combine_rank_facts(const std::vector<RankGpuFacts>& ranks, int rank, bool built_with_cuda);

struct BackendDecision {
  Backend backend = Backend::mpi;  // mpi or nccl (gloo for facts.rendezvous)
  std::string warning;             // for rank 0 to print once; "" when none
};

// Pure: throws CollectiveError (printed by rank 0) when the request cannot be had.
BackendDecision decide_backend(Backend requested, const BackendFacts& facts);

// The backend the request resolves to, agreed by all ranks (collective: over MPI, or
// after a rendezvous through its store, each rank's facts under cnnscale/backend/<rank>);
// prints decide_backend's warning once per process on rank 0. After a rendezvous:
// gloo for --backend gloo, else decide_backend with facts.rendezvous (nccl or gloo).
// device_cuda: the request is --device cuda's NCCL (BackendFacts::device_cuda).
Backend resolve_backend(Backend requested, const ProcessContext& ctx, double timeout_s = 300,
                        bool device_cuda = false);

// timeout_s: the gloo backend's deadline for every collective (--collective-timeout).
std::unique_ptr<Communicator> make_communicator(Backend requested, const ProcessContext& ctx,
                                                double timeout_s = 300, bool device_cuda = false);

// A communicator over one level of the hierarchical gradient sum (comm/shm_allreduce.hpp),
// for `cnnscale allreduce --level`: "node" = the ranks of this rank's node; "cross" = the
// ranks with this rank's local rank, one per node (every local rank gets its own, and all
// run at once, as in training); "world" = make_communicator. Collective over the world.
// UserError for another level.
std::unique_ptr<Communicator> make_level_communicator(Backend requested, const ProcessContext& ctx,
                                                      const std::string& level);

}  // namespace cnnscale
