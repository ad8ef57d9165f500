// rendezvous_bootstrap.cpp — bootstrap() for processes that share no MPI job
// (torchrun-style variables, TF_CONFIG): they meet at the rendezvous store. See
// bootstrap.hpp and rendezvous_store.hpp.
//
// Devices: with --backend auto or nccl (BootstrapOptions::use_gpu) each host's ranks
// choose their GPUs as under MPI (launch/device_binding.hpp), their views exchanged
// through the store; comm/make_communicator then picks NCCL or Gloo.
//
// MPI is still initialised, as a singleton: the error paths (abort_job, the MPI_Abort of
// main), HDF5's MPI build and the control plane's type tags assume an initialised MPI,
// and MPI_Init without a launcher costs ~0.1 s and talks to no other process. Every
// collective between ranks goes over Gloo (comm/gloo_communicator.hpp).
#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>

#include "launch/bootstrap.hpp"
#include "launch/cuda_devices.hpp"
#include "launch/device_binding.hpp"
#include "launch/gpu_diagnosis.hpp"
#include "launch/mpi_check.hpp"
#include "launch/rendezvous_token.hpp"
#include "util/env.hpp"
#include "util/error.hpp"
#include "util/utf8.hpp"
#include "util/log.hpp"
#include "util/process.hpp"

namespace cnnscale {
namespace {

std::string rank_list(const std::vector<int>& r) {
  std::string out;
  for (size_t i = 0; i < r.size() && i < 16; ++i) out += (i ? ", " : "") + std::to_string(r[i]);
  if (r.size() > 16) out += ", ... (" + std::to_string(r.size()) + " in all)";
  return out;
}

// The device choice of bootstrap() (launch/device_binding.hpp) for ranks that met at the
// store (--backend auto or nccl): every rank publishes its local rank and its device view
// under cnnscale/devices/<rank>; the ranks of each host choose among their views. The
// local rank is the launcher's LOCAL_RANK where the host's ranks carry LOCAL_RANK values
// 0..n-1 (n ranks on the host; torchrun sets LOCAL_RANK/LOCAL_WORLD_SIZE per node), else
// the order of the ranks on the host (TF_CONFIG, hand-started ranks without LOCAL_RANK).
void bind_device_through_store(ProcessContext& ctx, RendezvousStore& store, const std::vector<std::string>& hosts,
                               std::chrono::milliseconds timeout, bool share_gpu) {
  const LaunchInfo& li = ctx.launch;
  ctx.gpu_hints = gpu_presence_hints(process_env(), list_nvidia_dev_entries());
  VisibleDevices mine = query_visible_devices();
  ctx.cuda_error = probe_cuda().error;
  if (mine.ids.empty()) ctx.gpu_problem = explain_no_gpu(probe_cuda(), read_nvidia_kernel_version());
  const int launcher_local = li.local_size > 0 && li.local_rank >= 0 ? li.local_rank : -1;
  std::string v = std::to_string(launcher_local);
  for (const auto& id : mine.ids) v += "\n" + id;
  store.set("cnnscale/devices/" + std::to_string(ctx.rank), v);
  // The views of this host's ranks in rank order, with their launcher local ranks.
  std::vector<VisibleDevices> views;
  std::vector<int> launcher_locals;
  for (int r = 0; r < ctx.size; ++r) {
    if (hosts[static_cast<size_t>(r)] != ctx.host) continue;
    const std::string got = store.get("cnnscale/devices/" + std::to_string(r), timeout);
    std::istringstream in(got);
    std::string line;
    std::getline(in, line);
    launcher_locals.push_back(std::stoi(line));
    VisibleDevices view;
    while (std::getline(in, line))
      if (!line.empty()) view.ids.push_back(line);
    views.push_back(std::move(view));
  }
  std::vector<int> sorted = launcher_locals;
  std::sort(sorted.begin(), sorted.end());
  bool use_launcher = true;
  for (size_t i = 0; i < sorted.size(); ++i) use_launcher &= sorted[i] == static_cast<int>(i);
  if (use_launcher) {  // reorder the views by LOCAL_RANK
    std::vector<VisibleDevices> by_local(views.size());
    for (size_t i = 0; i < views.size(); ++i) by_local[static_cast<size_t>(launcher_locals[i])] = views[i];
    views = std::move(by_local);
    ctx.local_rank = launcher_local;
  } else if (launcher_local >= 0) {
    log_warn("the ranks on " + ctx.host + " do not carry LOCAL_RANK 0.." + std::to_string(views.size() - 1) +
             " (torchrun's per-node numbering); their GPUs are assigned in rank order instead");
  }
  apply_device_choice(choose_device(views, ctx.local_rank, ctx.host, share_gpu), ctx);
}

// Where and how this rank meets the others (rendezvous_store.hpp): torchrun's agent store
// when torchrun ≥ 2.0 says it serves one, else ours on rank 0; the token, if any.
StoreOptions store_options(const ProcessContext& ctx, const BootstrapOptions& opts, const EnvLookup& env) {
  const LaunchInfo& li = ctx.launch;
  StoreOptions so;
  so.addr = li.store_addr;
  so.port = li.store_port;
  so.timeout_s = opts.timeout_s;
  so.what = li.store_what;
  so.world_size = ctx.size;
  const auto agent = env("TORCHELASTIC_USE_AGENT_STORE");
  if (li.kind == LauncherKind::torchrun && agent && *agent == "True") {
    // torchrun's agent serves a TCPStore at MASTER_ADDR:MASTER_PORT for its whole life;
    // each restarted worker group gets keys of its own.
    so.protocol = StoreProtocol::torch;
    so.what = "torchrun's store at MASTER_ADDR/MASTER_PORT";
    so.key_prefix = "/cnnscale/" + env("TORCHELASTIC_RUN_ID").value_or("none") + "/attempt_" +
                    env("TORCHELASTIC_RESTART_COUNT").value_or("0") + "/";
    return so;
  }
  so.serve = ctx.rank == 0;
  if (auto t = token_from_env()) {
    so.token = *t;
  } else if (ctx.size > 1 && !opts.run_dir.empty()) {
    so.token_file = token_file_for_run_dir(opts.run_dir);
    if (so.serve) so.token = write_token_file(so.token_file);
  }
  return so;
}

}  // namespace

bool launcher_needs_rendezvous(const LaunchInfo& info) {
  return info.kind == LauncherKind::torchrun || info.kind == LauncherKind::tfconfig;
}

ProcessContext bootstrap_rendezvous(ProcessContext ctx, const BootstrapOptions& opts) {
  LaunchInfo& li = ctx.launch;
  ctx.mpi_thread_level = start_mpi_threaded();
  set_fatal_error_handler(&abort_job);
  int mpi_rank = 0, mpi_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  // Under mpirun/srun the ranks already share an MPI job. (Gloo beside a real MPI world
  // was tried: the ranks sum correctly, but Open MPI 4.1's mpiexec then reports every
  // rank as "exiting improperly" and returns 1, so it is refused.)
  if (mpi_size > 1) try {  // the same on every rank: rank 0 says it once
      fail("--backend gloo is for processes that share no MPI job (torchrun-style variables, TF_CONFIG), but ", li.name,
           " started these ", mpi_size, " ranks as one MPI job: use --backend mpi (or auto) under ", li.name,
           "; to compare Gloo with MPI, start the ranks with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT instead");
    } catch (const UserError& e) {
      throw CollectiveError(e.what(), mpi_rank);
    }
  ctx.rank = li.size > 0 ? li.rank : mpi_rank;
  ctx.size = li.size > 0 ? li.size : mpi_size;
  if (ctx.size > kMaxRendezvousRanks)  // before anything sized by it (issue 26 item 4)
    fail(li.size_var, "=", ctx.size, ": ranks that meet at a rendezvous store (launcher: ", li.name,
         ") are limited to ", kMaxRendezvousRanks,
         " (Gloo's full mesh: every rank connects to every other twice and reads every rank's address list); "
         "launch larger jobs with "
         "srun --mpi=pmix or mpirun, or fix ",
         li.size_var);
  set_log_rank(ctx.rank);
  ctx.host = this_host();

  // Where the store is: the launcher's, else MASTER_ADDR/MASTER_PORT from any launcher.
  const EnvLookup env = process_env();
  if (li.store_addr.empty()) {
    if (auto a = env("MASTER_ADDR")) li.store_addr = *a;
    li.store_what = "MASTER_ADDR/MASTER_PORT";
  }
  if (li.store_port == 0)
    if (auto p = env("MASTER_PORT")) li.store_port = parse_env_port("MASTER_PORT", *p);
  if (ctx.size == 1 && li.store_addr.empty()) {  // one process: a private store on any free port
    li.store_addr = "127.0.0.1";
    li.store_what = "this process alone";
  } else if (li.store_addr.empty() || li.store_port == 0) {
    fail("rank ", ctx.rank, " of ", ctx.size, " (launcher: ", li.name,
         ") has no rendezvous address: ", li.store_addr.empty() ? "MASTER_ADDR" : "MASTER_PORT",
         " is not set. The gloo backend meets at rank 0's host: set MASTER_ADDR (rank 0's host name or IP) and "
         "MASTER_PORT (a free TCP port) to the same values on every rank, as torchrun does");
  }
  const double timeout = opts.timeout_s;
  ctx.store = std::make_shared<RendezvousStore>(store_options(ctx, opts, env));
  RendezvousStore& store = *ctx.store;

  // Announce this rank; a second process claiming the same rank is an error.
  const std::string me = ctx.host + "\n" + std::to_string(ctx.size);
  if (!store.create(kJoinPrefix + std::to_string(ctx.rank), me)) {
    std::string first;  // the claim that came first: its host
    store.try_get(kJoinPrefix + std::to_string(ctx.rank), &first);
    first = first.substr(0, std::min<size_t>(first.find('\n'), 64));
    fail("rank ", ctx.rank, " joined the rendezvous at ", store.where(), " twice: a process on host '", first,
         "' had already joined as rank ", ctx.rank, " (", li.rank_var, "=", ctx.rank,
         "). Two processes were started with that rank, or one that is not this job's claimed it (it holds the job's "
         "rendezvous token, if one is set; rank 0 names its address). Give every process its own rank (0..",
         ctx.size - 1, "), stop the other one, and start the job again");
  }
  std::vector<std::string> keys;
  for (int r = 0; r < ctx.size; ++r) keys.push_back(kJoinPrefix + std::to_string(r));
  const auto ms = std::chrono::milliseconds(static_cast<long>(timeout * 1000));
  const std::vector<std::string> missing = store.wait(keys, ms);
  if (!missing.empty()) {
    std::vector<int> ranks;
    for (const auto& k : missing) ranks.push_back(std::stoi(k.substr(k.rfind('/') + 1)));
    // Rank 0 says what its store refused (issue 39 items 2, 3): a rank with another token
    // or none, strangers that never proved the token.
    const std::string refused = store.refusals();
    fail("rank ", ctx.rank, ": rank(s) ", rank_list(ranks), " of ", ctx.size, " (", li.size_var, "=", ctx.size,
         ") did not join the rendezvous at ", store.where(), " within ", timeout, " s (--collective-timeout)",
         refused.empty() ? ". Start" : "; " + refused + ". Otherwise, start", " every rank (", li.rank_var, "=0..",
         ctx.size - 1, ") with the same rendezvous address, or fix ", li.size_var);
  }
  std::vector<std::string> hosts(static_cast<size_t>(ctx.size));
  for (int r = 0; r < ctx.size; ++r) {
    std::string v;
    store.try_get(keys[static_cast<size_t>(r)], &v);
    std::istringstream in(v);
    std::string size_s;
    std::getline(in, hosts[static_cast<size_t>(r)]);
    std::getline(in, size_s);
    if (size_s != std::to_string(ctx.size))
      fail("rank ", r, " was started with a world size of ", size_s, " but rank ", ctx.rank, " with ", ctx.size, " (",
           li.size_var, "); give every rank the same world size");
  }
  // Topology from the hosts: a node is a host name, numbered in order of its lowest rank.
  std::map<std::string, int> node_of;
  for (const auto& h : hosts)
    if (!node_of.count(h)) {
      const int id = static_cast<int>(node_of.size());
      node_of[h] = id;
    }
  ctx.num_nodes = static_cast<int>(node_of.size());
  ctx.node_id = node_of[ctx.host];
  ctx.local_rank = 0;
  ctx.local_size = 0;
  for (int r = 0; r < ctx.size; ++r)
    if (hosts[static_cast<size_t>(r)] == ctx.host) {
      if (r < ctx.rank) ++ctx.local_rank;
      ++ctx.local_size;
    }
  // Gloo offers the address this rank reached the store through; a loopback one (MASTER_ADDR
  // naming rank 0's host via Debian's "127.0.1.1 hostname" line) is unreachable from other hosts.
  const std::string& via = store.local_address();
  if (ctx.num_nodes > 1 && (via.rfind("127.", 0) == 0 || via == "::1") && !env("GLOO_SOCKET_IFNAME")) {
    // Rank 0 serves the store and knows the address each join came from: a rank that joined
    // from an address of this host under another host name is named (issue 48 item 14: a
    // holder of the job's token claimed rank 1 so, and this message blamed MASTER_ADDR
    // alone). Such a claim may be an impostor's: rank 0 serves a few seconds more, so that
    // the real rank, arriving, is told "joined twice" at once, and names both claims then.
    std::string claims;
    int doubted = -1;
    for (int r = 1; r < ctx.size; ++r) {
      const std::string at = store.claim_address(keys[static_cast<size_t>(r)]);
      const std::string& host = hosts[static_cast<size_t>(r)];
      if (at.empty() || host == ctx.host || !(at.rfind("127.", 0) == 0 || at == "::1" || at == via)) continue;
      if (doubted < 0) doubted = r;
      if (claims.size() < 400)
        claims += (claims.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " joined as host '" +
                  escape_unprintable(host, 64) + "' from " + at;
    }
    if (doubted >= 0) {
      const std::string mark = kClaimedTwicePrefix + std::to_string(doubted);
      const double grace = std::min(5.0, timeout);
      if (store.wait({mark}, std::chrono::milliseconds(static_cast<long>(grace * 1000))).empty()) {
        std::string second;
        store.try_get(mark, &second);
        const size_t nl = second.find('\n');
        fail("rank ", doubted, " joined the rendezvous at ", store.where(), " as host '",
             escape_unprintable(hosts[static_cast<size_t>(doubted)], 64), "' from ",
             store.claim_address(keys[static_cast<size_t>(doubted)]), " (an address of this host, ", ctx.host,
             "), then a second process claimed rank ", doubted, " as host '", escape_unprintable(second.substr(0, nl), 64),
             "' from ", nl == std::string::npos ? "?" : escape_unprintable(second.substr(nl + 1), 64),
             " (refused: \"joined twice\"). Two processes were started as rank ", doubted,
             ", or the first is not this job's: a process that holds the job's rendezvous token claimed it. Stop "
             "it (on ", ctx.host, ", `ss -tnp` shows who is connected to the store's port) and start the job again");
      }
    }
    fail("rank ", ctx.rank, " on ", ctx.host, " reaches the rendezvous store at ", store.where(),
         " through the loopback address ", via, ", which the ranks on the other ", ctx.num_nodes - 1,
         " host(s) cannot reach: set MASTER_ADDR to rank 0's IP address on the network the hosts share "
         "(not a name that resolves to 127.x on rank 0's host), or set GLOO_SOCKET_IFNAME to that interface",
         claims.empty() ? "" : ". Yet " + claims +
                                   " (this host): if no rank of this job runs here under that name, a process that "
                                   "holds the job's rendezvous token claimed it");
  }
  ctx.device = -1;  // the CPU model unless a GPU is bound below
  ctx.device_label = "cpu";
  if (opts.use_gpu) bind_device_through_store(ctx, store, hosts, ms, opts.share_gpu);
  return ctx;
}

}  // namespace cnnscale
