// make_communicator.cpp — see make_communicator.hpp.
#include "comm/make_communicator.hpp"

#include <chrono>
#include <sstream>
#include <vector>

#include "comm/gloo_communicator.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/nccl.hpp"
#include "launch/gpu_diagnosis.hpp"
#include "launch/mpi_check.hpp"
#include "util/build_info.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

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

BackendDecision decide_backend(Backend requested, const BackendFacts& f) {
  BackendDecision d;
  if (requested == Backend::mpi) return d;
  if (requested == Backend::gloo) {
    d.backend = Backend::gloo;
    return d;
  }
  // The CPU backend for this launch: MPI, or Gloo for ranks that met at a rendezvous store.
  const Backend cpu = f.rendezvous ? Backend::gloo : Backend::mpi;
  const char* cpu_flag = f.rendezvous ? "--backend gloo" : "--backend mpi";
  d.backend = cpu;
  if (requested == Backend::nccl) {
    // --device cuda asked for this NCCL: name that switch, and the way to the CPU is --device
    // cpu (a host backend with --device cuda still needs the GPUs).
    const char* asked = f.device_cuda ? "--device cuda" : "--backend nccl";
    const char* to_cpu = f.device_cuda ? "--device cpu" : cpu_flag;
    if (!f.built_with_cuda)
      fail_collective(f.rank, asked, ": this cnnscale was built without CUDA/NCCL (-DCNNSCALE_CUDA=OFF or no "
                              "toolkit found); use ", to_cpu, " or rebuild with the CUDA toolkit");
    if (f.rank_without_gpu >= 0)
      fail_collective(f.rank, asked, " needs a GPU on every rank, but rank ", f.rank_without_gpu, " on ",
                      f.its_host, " has none: ", f.its_problem, "; or use ", to_cpu, " for a CPU run");
  }
  if (f.built_with_cuda && f.rank_without_gpu < 0) {
    d.backend = Backend::nccl;
    return d;
  }
  // auto, and some rank has no GPU: the CPU, but not in silence where GPUs seem to exist.
  if (f.rank_with_hints >= 0) {
    std::ostringstream os;
    os << "--backend auto trains on the CPU (" << (f.rendezvous ? "Gloo" : "MPI") << ") although " << f.hints_host << " looks like a GPU node (" << f.hints
       << "): rank " << f.rank_without_gpu << " on " << f.its_host << " has no usable GPU: " << f.its_problem
       << ". Pass --backend nccl to make this an error, or " << cpu_flag << " to choose the CPU "
       << "without this warning";
    d.warning = os.str();
  }
  return d;
}

namespace {

// The lowest rank for which `has` holds, and its text (with its host), sent to every
// rank; -1 and "" when no rank has it. Collective over MPI_COMM_WORLD.
int first_rank_with(bool has, const std::string& text, const std::string& host, std::string* its_text,
                    std::string* its_host) {
  int rank = 0, size = 1;
  mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &size));
  int mine = has ? rank : size, first = size;
  mpiCheck(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (first == size) return -1;
  std::string packed = rank == first ? host + '\n' + text : std::string();
  int len = static_cast<int>(packed.size());
  mpiCheck(MPI_Bcast(&len, 1, MPI_INT, first, MPI_COMM_WORLD));
  packed.resize(static_cast<size_t>(len));
  mpiCheck(MPI_Bcast(packed.data(), len, MPI_CHAR, first, MPI_COMM_WORLD));
  const size_t nl = packed.find('\n');
  *its_host = packed.substr(0, nl);
  *its_text = packed.substr(nl + 1);
  return first;
}

// Each rank's facts through the rendezvous store (collective over the ranks that met there).
std::vector<RankGpuFacts> exchange_facts(const ProcessContext& ctx, double timeout_s) {
  static int round = 0;  // every rank resolves the same number of times
  const std::string prefix = "cnnscale/backend/" + std::to_string(round++) + "/";
  std::string problem = ctx.gpu_problem;
  if (ctx.device < 0 && problem.empty()) problem = "no GPU was bound to it";
  const char sep = '\x1f';
  const std::string mine =
      ctx.host + sep + (ctx.device < 0 ? "1" : "0") + sep + problem + sep + join_hints(ctx.gpu_hints);
  RendezvousStore& store = *ctx.store;
  store.set(prefix + std::to_string(ctx.rank), mine);
  std::vector<RankGpuFacts> all(static_cast<size_t>(ctx.size));
  const auto ms = std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  for (int r = 0; r < ctx.size; ++r) {
    const std::string v = store.get(prefix + std::to_string(r), ms);
    std::vector<std::string> f;
    size_t b = 0;
    for (size_t e; (e = v.find(sep, b)) != std::string::npos; b = e + 1) f.push_back(v.substr(b, e - b));
    f.push_back(v.substr(b));
    if (f.size() != 4) internal_error("malformed backend facts of rank ", r, " in the rendezvous store");
    RankGpuFacts& x = all[static_cast<size_t>(r)];
    x.host = f[0];
    x.no_gpu = f[1] == "1";
    x.problem = f[2];
    x.hints = f[3];
  }
  return all;
}

}  // namespace

BackendFacts combine_rank_facts(const std::vector<RankGpuFacts>& ranks, int rank, bool built_with_cuda) {
  BackendFacts f;
  f.rank = rank;
  f.built_with_cuda = built_with_cuda;
  f.rendezvous = true;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankGpuFacts& x = ranks[r];
    if (x.no_gpu && f.rank_without_gpu < 0) {
      f.rank_without_gpu = static_cast<int>(r);
      f.its_host = x.host;
      f.its_problem = x.problem;
    }
    if (!x.hints.empty() && f.rank_with_hints < 0) {
      f.rank_with_hints = static_cast<int>(r);
      f.hints = x.hints;
      f.hints_host = x.host;
    }
  }
  return f;
}

Backend resolve_backend(Backend requested, const ProcessContext& ctx, double timeout_s, bool device_cuda) {
  if (ctx.store) {  // the ranks met at a rendezvous store: nccl or gloo
    if (requested == Backend::gloo) return Backend::gloo;
    if (requested == Backend::mpi) internal_error("--backend mpi after a rendezvous");
    BackendFacts f = combine_rank_facts(exchange_facts(ctx, timeout_s), ctx.rank, built_with_cuda());
    f.device_cuda = device_cuda;
    const BackendDecision d = decide_backend(requested, f);
    if (!d.warning.empty()) log_warn(d.warning);  // rank 0 prints
    return d.backend;
  }
  if (requested == Backend::gloo) internal_error("--backend gloo without a rendezvous");
  if (requested == Backend::mpi) return Backend::mpi;  // the same request on every rank
  BackendFacts f;
  f.rank = ctx.rank;
  f.built_with_cuda = built_with_cuda();
  f.device_cuda = device_cuda;
  std::string problem = ctx.gpu_problem;
  if (ctx.device < 0 && problem.empty()) problem = "no GPU was bound to it";
  f.rank_without_gpu = first_rank_with(ctx.device < 0, problem, ctx.host, &f.its_problem, &f.its_host);
  f.rank_with_hints =
      first_rank_with(!ctx.gpu_hints.empty(), join_hints(ctx.gpu_hints), ctx.host, &f.hints, &f.hints_host);
  const BackendDecision d = decide_backend(requested, f);
  static bool warned = false;
  if (!d.warning.empty() && !warned) {
    warned = true;
    log_warn(d.warning);
  }
  return d.backend;
}

std::unique_ptr<Communicator> make_communicator(Backend requested, const ProcessContext& ctx, double timeout_s,
                                                bool device_cuda) {
  Backend b = resolve_backend(requested, ctx, timeout_s, device_cuda);
  if (b == Backend::gloo)
    return make_gloo_communicator(make_gloo_context(*ctx.store, "data", ctx.rank, ctx.size, timeout_s), timeout_s);
  if (b == Backend::nccl && ctx.store)
    return make_nccl_communicator(*ctx.store, ctx.rank, ctx.size, ctx.device, timeout_s);
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
