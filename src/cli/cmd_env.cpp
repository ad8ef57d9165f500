// cmd_env.cpp — `cnnscale env`: how this launch looks from every rank, one line per
// rank in rank order (gathered to rank 0). Also the quickest check that srun/mpirun,
// PMIx and the GPU binding do what the user thinks.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "comm/make_communicator.hpp"
#include "comm/nccl.hpp"
#include "launch/bootstrap.hpp"
#include "launch/mpi_check.hpp"
#include "util/build_info.hpp"

namespace cnnscale::cli {

int cmd_env(int argc, char** argv) {
  CommandSpec spec{"env", "cnnscale env [options]",
                   "Prints one line per rank (in rank order, from rank 0): launcher, rank, size, local rank,\n"
                   "node id, host, device, backend, MPI library and NCCL version. Run it under the same\n"
                   "srun/mpirun line as your training to see what each rank will use.",
                   "Examples:\n  srun --mpi=pmix -N2 --ntasks-per-node=4 cnnscale env\n  mpirun -n 2 cnnscale env"};
  po::options_description desc("Options");
  desc.add_options()("backend", po::value<std::string>()->default_value("auto"), "auto|mpi|nccl")(
      "allow-gpu-sharing", po::bool_switch(), "let several ranks share one GPU");
  auto parsed = parse_options(spec, argc, argv, desc);
  if (parsed.help) {
    print_help(spec, desc);
    return 0;
  }
  Backend requested = parse_backend(parsed.vm["backend"].as<std::string>());
  BootstrapOptions bo;
  bo.allow_gpu_sharing = parsed.vm["allow-gpu-sharing"].as<bool>();
  bo.use_gpu = requested != Backend::mpi;
  ProcessContext ctx = bootstrap(bo);
  Backend b = resolve_backend(requested, ctx);

  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(mpi_version, &len);
  std::string mpi_v(mpi_version);
  if (auto nl = mpi_v.find_first_of(",\n"); nl != std::string::npos) mpi_v.resize(nl);

  std::ostringstream line;
  line << "launcher=" << ctx.launch.name << " rank=" << ctx.rank << " size=" << ctx.size
       << " local_rank=" << ctx.local_rank << " local_size=" << ctx.local_size << " node=" << ctx.node_id
       << " nodes=" << ctx.num_nodes << " host=" << ctx.host << " device=" << ctx.device_label
       << " backend=" << (b == Backend::nccl ? "nccl" : "mpi") << " mpi=\"" << mpi_v << "\"";
  if (built_with_cuda()) line << " nccl=" << nccl_version();
  if (!ctx.launch.job_id.empty()) line << " slurm_job=" << ctx.launch.job_id;

  constexpr int kLine = 1024;
  char mine[kLine] = {0};
  std::strncpy(mine, line.str().c_str(), kLine - 1);
  std::vector<char> all(ctx.rank == 0 ? static_cast<size_t>(kLine) * ctx.size : 1);
  mpiCheck(MPI_Gather(mine, kLine, MPI_CHAR, all.data(), kLine, MPI_CHAR, 0, MPI_COMM_WORLD));
  if (ctx.rank == 0)
    for (int r = 0; r < ctx.size; ++r) std::printf("%s\n", &all[static_cast<size_t>(r) * kLine]);
  std::fflush(stdout);
  return 0;
}

}  // namespace cnnscale::cli
