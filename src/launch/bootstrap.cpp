// bootstrap.cpp — see bootstrap.hpp.
#include "launch/bootstrap.hpp"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "launch/cuda_devices.hpp"
#include "launch/detect_launcher.hpp"
#include "launch/device_binding.hpp"
#include "launch/gpu_diagnosis.hpp"
#include "launch/mpi_check.hpp"
#include "launch/pmix_query.hpp"
#include "util/env.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/process.hpp"

namespace cnnscale {

std::vector<VisibleDevices> gather_views(const VisibleDevices& mine, MPI_Comm local_comm) {
  int local_size = 1;
  mpiCheck(MPI_Comm_size(local_comm, &local_size));
  std::string packed;
  for (const std::string& id : mine.ids) packed += id + "\n";
  int len = static_cast<int>(packed.size());
  std::vector<int> lens(static_cast<size_t>(local_size)), offs(static_cast<size_t>(local_size));
  mpiCheck(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, local_comm));
  int total = 0;
  for (int i = 0; i < local_size; ++i) {
    offs[static_cast<size_t>(i)] = total;
    total += lens[static_cast<size_t>(i)];
  }
  std::vector<char> all(static_cast<size_t>(std::max(total, 1)));
  mpiCheck(MPI_Allgatherv(packed.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, local_comm));
  std::vector<VisibleDevices> views(static_cast<size_t>(local_size));
  for (int i = 0; i < local_size; ++i) {
    const std::string text(all.data() + offs[static_cast<size_t>(i)],
                           static_cast<size_t>(lens[static_cast<size_t>(i)]));
    size_t start = 0;
    for (size_t nl = text.find('\n'); nl != std::string::npos; start = nl + 1, nl = text.find('\n', start))
      views[static_cast<size_t>(i)].ids.push_back(text.substr(start, nl - start));
  }
  return views;
}

int launcher_rank_or_zero() {
  try {
    return detect_launcher(process_env()).rank;
  } catch (const UserError&) {
    return 0;
  }
}

bool mpi_active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

int start_mpi_threaded() {
  int provided = 0;
  // Open MPI's MPI_Init loads hwloc's topology, and hwloc's "gl" plugin opens X displays
  // :0, :1, … (each a "localhost" lookup): on a host without an /etc/hosts entry for it
  // (a minimal container) every lookup waits on DNS, and `cnnscale env` under TF_CONFIG
  // took minutes to start. Compute nodes have no X; the "opencl" plugin only names
  // OpenCL devices. Left as set when the user set HWLOC_COMPONENTS.
  if (!mpi_active()) ::setenv("HWLOC_COMPONENTS", "-gl,-opencl", 0);
  if (!mpi_active())
    mpiCheck(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  else
    mpiCheck(MPI_Query_thread(&provided));
  return provided;
}

void finalize_mpi() {
  if (mpi_active()) MPI_Finalize();
}

void check_launch_against_mpi(const LaunchInfo& info, int mpi_rank, int mpi_size) {
  if (info.size < 0) return;  // nothing to compare
  if (info.size > 1 && mpi_size == 1) {
    if (info.kind == LauncherKind::slurm)
      fail("srun started ", info.size, " tasks (", info.size_var, "=", info.size,
           ") but MPI sees a world of 1: this srun ran without PMIx/PMI support, so every task is rank 0 "
           "of its own job. Launch with `srun --mpi=pmix` (or `--mpi=pmi2`); `srun --mpi=list` shows what "
           "this Slurm supports");
    fail("the ", info.name, " environment says ", info.size, " ranks (", info.size_var, "=", info.size,
         ") but MPI sees a world of 1: the MPI library was not started by that launcher. Launch with "
         "`srun --mpi=pmix` or `mpirun -n ", info.size, "`, or unset the stale ", info.size_var,
         (info.kind == LauncherKind::torchrun || info.kind == LauncherKind::tfconfig
              ? " (`cnnscale train` and `cnnscale allreduce` join such processes over Gloo: --backend auto or gloo)"
              : ""));
  }
  if (info.size != mpi_size)
    fail("the ", info.name, " environment says ", info.size, " ranks (", info.size_var, ") but MPI_COMM_WORLD has ",
         mpi_size,
         "; the launch is inconsistent (stale variables from "
         "another launcher?)");
  if (info.rank != mpi_rank)
    fail("the ", info.name, " environment says this is rank ", info.rank, " (", info.rank_var, ") but MPI says rank ",
         mpi_rank, "; the launch is inconsistent");
}

ProcessContext bootstrap(const BootstrapOptions& opts) {
  ProcessContext ctx;
  try {
    ctx.launch = detect_launcher(process_env());
    check_pmi_available(ctx.launch);
    if (ctx.launch.kind == LauncherKind::pmix) {
      query_pmix(ctx.launch);
      validate_launch_info(ctx.launch);
    }
  } catch (const CollectiveError&) {
    throw;
  } catch (const UserError& e) {
    // The launcher gave every task the same kind of environment: rank 0 says it once.
    throw CollectiveError(e.what(), launcher_rank_or_zero());
  }

  if (opts.rendezvous) return bootstrap_rendezvous(std::move(ctx), opts);
  ctx.mpi_thread_level = start_mpi_threaded();
  // From here a failed library call (CUDA, cuDNN, cuBLAS) aborts every rank, not just this one.
  set_fatal_error_handler(&abort_job);
  if (ctx.launch.kind == LauncherKind::pmix) release_pmix();
  mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &ctx.rank));
  mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &ctx.size));
  set_log_rank(ctx.rank);
  check_launch_against_mpi(ctx.launch, ctx.rank, ctx.size);

  // Topology from MPI itself: ranks sharing memory form a node.
  ctx.host = this_host();
  mpiCheck(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, ctx.rank, MPI_INFO_NULL, &ctx.local_comm));
  mpiCheck(MPI_Comm_rank(ctx.local_comm, &ctx.local_rank));
  mpiCheck(MPI_Comm_size(ctx.local_comm, &ctx.local_size));
  int leader = ctx.local_rank == 0 ? 1 : 0;
  mpiCheck(MPI_Allreduce(&leader, &ctx.num_nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  // Node id = number of node leaders with a lower world rank than this node's leader.
  int leader_rank = ctx.rank;
  mpiCheck(MPI_Bcast(&leader_rank, 1, MPI_INT, 0, ctx.local_comm));
  std::vector<int> leaders(static_cast<size_t>(ctx.size));
  mpiCheck(MPI_Allgather(&leader_rank, 1, MPI_INT, leaders.data(), 1, MPI_INT, MPI_COMM_WORLD));
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  ctx.node_id = static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), leader_rank) - leaders.begin());

  // Device: gather every local rank's view (physical GPU ids by ordinal), then choose.
  ctx.gpu_hints = gpu_presence_hints(process_env(), list_nvidia_dev_entries());
  VisibleDevices mine;
  if (opts.use_gpu) {
    mine = query_visible_devices();
    ctx.cuda_error = probe_cuda().error;
    if (mine.ids.empty()) ctx.gpu_problem = explain_no_gpu(probe_cuda(), read_nvidia_kernel_version());
  }
  std::vector<VisibleDevices> local = gather_views(mine, ctx.local_comm);
  apply_device_choice(choose_device(local, ctx.local_rank, ctx.host, opts.share_gpu), ctx);
  return ctx;
}

void apply_device_choice(const DeviceChoice& choice, ProcessContext& ctx) {
  ctx.device = choice.device;
  ctx.device_id = choice.id;
  ctx.gpu_sharing = choice.device < 0 ? 1 : choice.sharing;
  ctx.device_label = device_name(ctx.device);
}

}  // namespace cnnscale
