// make_communicator.cpp — see make_communicator.hpp.
#include "comm/make_communicator.hpp"

#include "comm/gloo_communicator.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/nccl.hpp"
#include "launch/mpi_check.hpp"
#include "util/build_info.hpp"
#include "util/error.hpp"

namespace cnnscale {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::automatic: return "auto";
    case Backend::mpi: return "mpi";
    case Backend::nccl: return "nccl";
    case Backend::gloo: return "gloo";
  }
  return "?";
}

Backend parse_backend(const std::string& s) {
  if (s == "auto") return Backend::automatic;
  if (s == "mpi") return Backend::mpi;
  if (s == "nccl") return Backend::nccl;
  if (s == "gloo") return Backend::gloo;
  fail("--backend ", s, " is not a backend; use auto, mpi, nccl or gloo");
}

Backend resolve_backend(Backend requested, const ProcessContext& ctx) {
  if (ctx.store) return Backend::gloo;  // the ranks met at a rendezvous store (start_world chose gloo)
  if (requested == Backend::gloo) internal_error("--backend gloo without a rendezvous");
  int has_gpu = ctx.device >= 0 ? 1 : 0, all_gpu = 0;
  mpiCheck(MPI_Allreduce(&has_gpu, &all_gpu, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (requested == Backend::mpi) return Backend::mpi;
  if (requested == Backend::nccl) {
    if (!built_with_cuda())
      fail("--backend nccl: this cnnscale was built without CUDA/NCCL (-DCNNSCALE_CUDA=OFF or no toolkit "
           "found); use --backend mpi or rebuild with the CUDA toolkit");
    if (!has_gpu)
      fail("--backend nccl needs a GPU on every rank, but rank ", ctx.rank, " on ", ctx.host,
           " sees none (check CUDA_VISIBLE_DEVICES and --gres=gpu); use --backend mpi for CPU runs");
    if (!all_gpu) fail("--backend nccl needs a GPU on every rank, but some ranks have none; use --backend mpi");
    return Backend::nccl;
  }
  return (built_with_cuda() && all_gpu) ? Backend::nccl : Backend::mpi;
}

std::unique_ptr<Communicator> make_communicator(Backend requested, const ProcessContext& ctx, double timeout_s) {
  Backend b = resolve_backend(requested, ctx);
  if (b == Backend::gloo)
    return make_gloo_communicator(make_gloo_context(*ctx.store, "data", ctx.rank, ctx.size, timeout_s), timeout_s);
  if (b == Backend::nccl) return make_nccl_communicator(MPI_COMM_WORLD, ctx.device);
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

std::unique_ptr<Communicator> make_level_communicator(Backend requested, const ProcessContext& ctx,
                                                      const std::string& level) {
  if (level == "world") return make_communicator(requested, ctx);
  if (ctx.store)
    fail("--level ", level, " splits the MPI world, and the gloo backend has none; use --level world with "
         "--backend gloo, or launch with mpirun/srun and --backend mpi");
  if (level != "node" && level != "cross") fail("--level ", level, " is not known; use world, node or cross");
  const Backend b = resolve_backend(requested, ctx);
  const bool node = level == "node";
  MPI_Comm sub = MPI_COMM_NULL;
  mpiCheck(
      MPI_Comm_split(MPI_COMM_WORLD, node ? ctx.node_id : ctx.local_rank, node ? ctx.local_rank : ctx.node_id, &sub));
  if (b == Backend::nccl) return make_nccl_communicator(sub, ctx.device);
  auto c = std::make_unique<MpiCommunicator>(sub);  // dups `sub`
  MPI_Comm_free(&sub);
  return c;
}

}  // namespace cnnscale
