// detect_launcher.cpp — see detect_launcher.hpp.
#include "launch/detect_launcher.hpp"

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/json_bounded.hpp"

namespace cnnscale {

const char* launcher_kind_name(LauncherKind k) {
  switch (k) {
    case LauncherKind::pmix: return "pmix";
    case LauncherKind::slurm: return "slurm";
    case LauncherKind::mpirun: return "mpirun";
    case LauncherKind::torchrun: return "torchrun";
    case LauncherKind::tfconfig: return "tfconfig";
    case LauncherKind::none: return "none";
  }
  return "?";
}

namespace {

// Reads an integer variable into out (unchanged when unset); remembers its name.
bool read_int(const EnvLookup& env, const std::string& name, int& out, std::string* which = nullptr) {
  auto v = env(name);
  if (!v) return false;
  out = static_cast<int>(parse_env_int(name, *v));
  if (which) *which = name;
  return true;
}

bool has(const EnvLookup& env, const std::string& name) { return env(name).has_value(); }

void read_slurm(const EnvLookup& env, LaunchInfo& info) {
  read_int(env, "SLURM_PROCID", info.rank, &info.rank_var);
  if (!read_int(env, "SLURM_STEP_NUM_TASKS", info.size, &info.size_var))
    read_int(env, "SLURM_NTASKS", info.size, &info.size_var);
  read_int(env, "SLURM_LOCALID", info.local_rank);
  read_int(env, "SLURM_NODEID", info.node_id);
  if (!read_int(env, "SLURM_STEP_NUM_NODES", info.num_nodes)) read_int(env, "SLURM_NNODES", info.num_nodes);
  if (auto j = env("SLURM_JOB_ID")) info.job_id = *j;
  if (auto g = env("SLURM_STEP_GPUS")) info.gpus = *g;
  else if (auto g2 = env("SLURM_JOB_GPUS")) info.gpus = *g2;
}

void read_ompi(const EnvLookup& env, LaunchInfo& info) {
  read_int(env, "OMPI_COMM_WORLD_RANK", info.rank, &info.rank_var);
  read_int(env, "OMPI_COMM_WORLD_SIZE", info.size, &info.size_var);
  read_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", info.local_rank);
  read_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", info.local_size);
}

bool slurm_step(const EnvLookup& env) {
  return has(env, "SLURM_PROCID") && !has(env, "OMPI_COMM_WORLD_RANK");
}

// TF_CONFIG = {"cluster": {"chief": [...], "worker": ["host:port", ...]}, "task": {"type":
// "worker", "index": i}}: ranks are the chief (if any) then the workers, in list order,
// as MultiWorkerMirroredStrategy numbers them; the first one's address hosts the store.
void read_tf_config(const std::string& text, LaunchInfo& info) {
  nlohmann::json j;
  try {
    j = parse_json(text);
  } catch (const std::exception& e) {
    fail("TF_CONFIG is not valid JSON (", e.what(), "); it must look like "
         "{\"cluster\": {\"worker\": [\"host0:port\", \"host1:port\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}");
  }
  auto list = [&](const char* role) {
    std::vector<std::string> out;
    if (j.contains("cluster") && j["cluster"].is_object() && j["cluster"].contains(role)) {
      const auto& l = j["cluster"][role];
      if (!l.is_array()) fail("TF_CONFIG: cluster.", role, " must be a list of \"host:port\" strings");
      for (const auto& a : l) {
        if (!a.is_string()) fail("TF_CONFIG: cluster.", role, " must be a list of \"host:port\" strings");
        out.push_back(a.get<std::string>());
      }
    }
    return out;
  };
  std::vector<std::string> chief = list("chief"), worker = list("worker");
  if (chief.size() > 1) fail("TF_CONFIG: cluster.chief has ", chief.size(), " entries; TensorFlow allows one");
  std::vector<std::string> all = chief;
  all.insert(all.end(), worker.begin(), worker.end());
  if (all.empty()) fail("TF_CONFIG has no cluster.worker list (nor cluster.chief): cnnscale needs the workers' \"host:port\" addresses");
  if (!j.contains("task") || !j["task"].is_object() || !j["task"].contains("index") || !j["task"]["index"].is_number_integer())
    fail("TF_CONFIG has no task.index: every worker's TF_CONFIG says which entry of cluster.worker it is");
  const std::string type = j["task"].value("type", std::string("worker"));
  const long idx = j["task"]["index"].get<long>();
  long rank = -1;
  if (type == "chief") rank = idx;
  else if (type == "worker") rank = static_cast<long>(chief.size()) + idx;
  else fail("TF_CONFIG: task.type '", type, "' is not trained by cnnscale (only chief and worker; parameter servers "
            "and evaluators have no place in data-parallel training)");
  const size_t own = type == "chief" ? chief.size() : worker.size();
  if (idx < 0 || static_cast<size_t>(idx) >= own)
    fail("TF_CONFIG: task.index ", idx, " is not an entry of cluster.", type, " (", own, " entries)");
  const std::string& first = all.front();
  const auto colon = first.rfind(':');
  if (colon == std::string::npos || colon + 1 == first.size())
    fail("TF_CONFIG: the first worker's address '", first, "' has no port (\"host:port\")");
  std::string host = first.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  info.rank = static_cast<int>(rank);
  info.size = static_cast<int>(all.size());
  info.rank_var = "TF_CONFIG task.index";
  info.size_var = "TF_CONFIG cluster";
  info.store_addr = host;
  info.store_port = parse_env_port("TF_CONFIG's first worker port", first.substr(colon + 1));
  info.store_what = "TF_CONFIG's first worker " + first;
}

}  // namespace

LaunchInfo detect_launcher(const EnvLookup& env) {
  LaunchInfo info;
  const bool pmix = has(env, "PMIX_NAMESPACE") && has(env, "PMIX_RANK");
  const bool pmi2 = has(env, "PMI_FD") || has(env, "PMI_RANK");
  info.has_pmi = pmix || pmi2;
  if (pmix) {
    // Sizes come from PMIx_Get later; fill what the co-present launcher says meanwhile.
    if (slurm_step(env)) {
      read_slurm(env, info);
      info.name = "srun+pmix";
    } else if (has(env, "OMPI_COMM_WORLD_RANK")) {
      read_ompi(env, info);
      info.name = "mpirun+pmix";
    } else {
      info.name = "pmix";
    }
    info.kind = LauncherKind::pmix;
    read_int(env, "PMIX_RANK", info.rank, &info.rank_var);
    if (info.size_var.empty()) info.size = -1;  // unknown until PMIx_Get
  } else if (slurm_step(env)) {
    info.kind = LauncherKind::slurm;
    info.name = pmi2 ? "srun+pmi2" : "srun";
    read_slurm(env, info);
    if (info.size_var.empty())
      fail("SLURM_PROCID is set but neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS is; "
           "the Slurm environment is incomplete (launch with srun)");
  } else if (has(env, "OMPI_COMM_WORLD_RANK")) {
    info.kind = LauncherKind::mpirun;
    info.name = "mpirun";
    read_ompi(env, info);
    if (info.size_var.empty()) fail("OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
  } else if (has(env, "RANK") || has(env, "WORLD_SIZE")) {
    info.kind = LauncherKind::torchrun;
    info.name = "torchrun";
    if (!read_int(env, "RANK", info.rank, &info.rank_var))
      fail("WORLD_SIZE is set but RANK is not (torchrun-style environment needs both)");
    if (!read_int(env, "WORLD_SIZE", info.size, &info.size_var))
      fail("RANK is set but WORLD_SIZE is not (torchrun-style environment needs both)");
    read_int(env, "LOCAL_RANK", info.local_rank);
    read_int(env, "LOCAL_WORLD_SIZE", info.local_size);
    read_int(env, "GROUP_RANK", info.node_id);
    if (auto a = env("MASTER_ADDR")) info.store_addr = *a;
    if (auto p = env("MASTER_PORT")) info.store_port = parse_env_port("MASTER_PORT", *p);
    info.store_what = "MASTER_ADDR/MASTER_PORT";
  } else if (auto tf = env("TF_CONFIG")) {
    info.kind = LauncherKind::tfconfig;
    info.name = "TF_CONFIG";
    read_tf_config(*tf, info);
  }
  validate_launch_info(info);
  return info;
}

void validate_launch_info(const LaunchInfo& info) {
  const std::string who = std::string(" (launcher: ") + info.name + ")";
  if (info.size == 0) fail(info.size_var, "=0: a job needs at least one rank", who);
  if (info.size > 0 && info.rank >= info.size)
    fail("rank ", info.rank, " (", info.rank_var, ") is not below the job size ", info.size, " (",
         info.size_var, ")", who, "; the launcher environment is inconsistent");
  if (info.local_size == 0) fail("local size is 0", who);
  if (info.local_size > 0 && info.local_rank >= info.local_size)
    fail("local rank ", info.local_rank, " is not below the local size ", info.local_size, who,
         "; the launcher environment is inconsistent");
  if (info.size > 0 && info.local_size > info.size)
    fail("local size ", info.local_size, " exceeds the job size ", info.size, who);
  if (info.num_nodes > 0 && info.node_id >= info.num_nodes)
    fail("node id ", info.node_id, " is not below the node count ", info.num_nodes, who);
}

void check_pmi_available(const LaunchInfo& info) {
  if (info.kind == LauncherKind::slurm && info.size > 1 && !info.has_pmi)
    fail("srun started ", info.size, " tasks (", info.size_var, "=", info.size,
         ") without PMIx or PMI-2, so MPI cannot join them and every task would run as rank 0 of a world of 1. "
         "Launch with `srun --mpi=pmix` (or `--mpi=pmi2`); `srun --mpi=list` shows what this Slurm supports, "
         "and MpiDefault=pmix in slurm.conf makes it the default");
}

}  // namespace cnnscale
