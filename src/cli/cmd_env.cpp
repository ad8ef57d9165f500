// cmd_env.cpp — `cnnscale env`: how this launch looks from every rank, one line per
// rank in rank order (gathered to rank 0). Also the quickest check that srun/mpirun,
// PMIx and the GPU binding do what the user thinks.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "comm/make_communicator.hpp"
#include "comm/nccl.hpp"
#include "launch/bootstrap.hpp"
#include "launch/detect_launcher.hpp"
#include "util/env.hpp"
#include "util/error.hpp"
#include "launch/mpi_check.hpp"
#include "util/build_info.hpp"

namespace cnnscale::cli {

namespace {

// Every rank's `mine`, at rank 0 (empty elsewhere): over MPI after an MPI launch, through
// the rendezvous store after a torchrun/TF_CONFIG launch (issue 26 item 2: there the MPI
// world is this process alone). A rank's set is answered by the store before it returns,
// so ranks other than 0 may exit right after it; rank 0 waits for all.
std::vector<std::string> gather_to_rank0(const ProcessContext& ctx, const std::string& mine, const std::string& tag,
                                         double timeout_s) {
  std::vector<std::string> out;
  if (ctx.store) {
    ctx.store->set("cnnscale/env/" + tag + "/" + std::to_string(ctx.rank), mine);
    if (ctx.rank != 0) return out;
    const auto ms = std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
    for (int r = 0; r < ctx.size; ++r) out.push_back(ctx.store->get("cnnscale/env/" + tag + "/" + std::to_string(r), ms));
    return out;
  }
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(ctx.size)), offs(static_cast<size_t>(ctx.size));
  mpiCheck(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  int total = 0;
  for (int r = 0; r < ctx.size; ++r) {
    offs[static_cast<size_t>(r)] = total;
    total += lens[static_cast<size_t>(r)];
  }
  std::vector<char> all(static_cast<size_t>(std::max(total, 1)));
  mpiCheck(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, 0, MPI_COMM_WORLD));
  if (ctx.rank != 0) return out;
  for (int r = 0; r < ctx.size; ++r)
    out.emplace_back(all.data() + offs[static_cast<size_t>(r)], static_cast<size_t>(lens[static_cast<size_t>(r)]));
  return out;
}

// After the table, rank 0 prints why ranks have no GPU (the CUDA error, driver and
// runtime versions, the fix), once per distinct reason: "no GPU on rank(s) 0, 1: <why>".
void print_gpu_problems(const std::vector<std::string>& problems) {
  std::vector<std::pair<std::string, std::string>> seen;  // problem → "0, 3"
  for (size_t r = 0; r < problems.size(); ++r) {
    const std::string& p = problems[r];
    if (p.empty()) continue;
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& e) { return e.first == p; });
    if (it == seen.end()) seen.emplace_back(p, std::to_string(r));
    else it->second += ", " + std::to_string(r);
  }
  for (const auto& [problem, ranks] : seen)
    std::printf("no GPU on rank%s %s: %s\n", ranks.find(',') == std::string::npos ? "" : "s", ranks.c_str(),
                problem.c_str());
}

}  // namespace

int cmd_env(int argc, char** argv) {
  CommandSpec spec{"env", "cnnscale env [options]",
                   "Prints one line per rank (in rank order, from rank 0): launcher, rank, size, local rank,\n"
                   "node id, host, device (and its UUID), backend, MPI library and NCCL version; then, for\n"
                   "ranks without a GPU, why (CUDA's error, driver and runtime versions, the fix). Run it\n"
                   "under the same srun/mpirun line as your training to see what each rank will use.",
                   "Examples:\n  srun --mpi=pmix -N2 --ntasks-per-node=4 cnnscale env\n  mpirun -n 2 cnnscale env\n"
                   "  torchrun --nproc_per_node=2 --no-python cnnscale env"};
  po::options_description desc("Options");
  desc.add_options()("backend", po::value<std::string>()->default_value("auto"), "auto|mpi|nccl|gloo")(
      "collective-timeout", po::value<double>()->default_value(300),
      "seconds to wait for the other ranks (at the rendezvous store under torchrun/TF_CONFIG)");
  auto parsed = parse_options(spec, argc, argv, desc);
  if (parsed.help) {
    print_help(spec, desc);
    return 0;
  }
  Backend requested = parse_backend(parsed.vm["backend"].as<std::string>());
  BootstrapOptions bo;
  bo.use_gpu = requested != Backend::mpi && requested != Backend::gloo;
  bo.rendezvous = requested == Backend::gloo;
  bo.timeout_s = parsed.vm["collective-timeout"].as<double>();
  if (requested != Backend::mpi && requested != Backend::gloo) {  // torchrun, TF_CONFIG: the ranks meet at the rendezvous store, as train's do
    try {
      bo.rendezvous = launcher_needs_rendezvous(detect_launcher(process_env()));
    } catch (const UserError&) {
      // bootstrap() reports a malformed environment
    }
  }
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
       << " backend=" << backend_name(b);
  if (!ctx.device_id.empty()) line << " device_id=" << ctx.device_id;
  if (!ctx.cuda_error.empty()) line << " cuda_error=\"" << ctx.cuda_error << "\"";
  line << " mpi=\"" << mpi_v << "\"";
  if (built_with_cuda()) line << " nccl=" << nccl_version();
  if (!ctx.launch.job_id.empty()) line << " slurm_job=" << ctx.launch.job_id;

  const std::vector<std::string> lines = gather_to_rank0(ctx, line.str(), "line", bo.timeout_s);
  const std::vector<std::string> problems = gather_to_rank0(ctx, ctx.gpu_problem, "gpu_problem", bo.timeout_s);
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  print_gpu_problems(problems);
  std::fflush(stdout);
  return 0;
}

}  // namespace cnnscale::cli
