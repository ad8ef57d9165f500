// device_binding.cpp — see device_binding.hpp.
#include "launch/device_binding.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "launch/cuda_devices.hpp"
#include "util/error.hpp"

namespace cnnscale {
namespace {

// Ordinal per local rank (-1: none), distinct physical devices where possible. Ranks in
// order take their first free device; a rank that finds none free moves earlier ranks to
// other devices of theirs (augmenting paths), so any assignment with distinct devices
// that exists is found, and identical views give local rank i ordinal i.
std::vector<int> match_distinct(const std::vector<VisibleDevices>& local) {
  const size_t n = local.size();
  std::vector<int> ordinal(n, -1);
  std::map<std::string, int> holder;  // physical id → local rank
  std::set<std::string> visited;
  std::function<bool(size_t)> place = [&](size_t r) -> bool {
    const auto& ids = local[r].ids;
    for (size_t o = 0; o < ids.size(); ++o)
      if (!holder.count(ids[o]) && !visited.count(ids[o])) {
        holder[ids[o]] = static_cast<int>(r);
        ordinal[r] = static_cast<int>(o);
        return true;
      }
    for (size_t o = 0; o < ids.size(); ++o) {
      if (!visited.insert(ids[o]).second) continue;
      const int other = holder.at(ids[o]);
      if (place(static_cast<size_t>(other))) {
        holder[ids[o]] = static_cast<int>(r);
        ordinal[r] = static_cast<int>(o);
        return true;
      }
    }
    return false;
  };
  for (size_t r = 0; r < n; ++r) {
    if (local[r].ids.empty()) continue;
    visited.clear();
    place(r);
  }
  return ordinal;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size(); ++i) os << (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") << ranks[i];
  return os.str();
}

}  // namespace

DeviceChoice choose_device(const std::vector<VisibleDevices>& local, int my_local_rank, const std::string& host,
                           bool allow_sharing) {
  const size_t me = static_cast<size_t>(my_local_rank);
  if (local.at(me).ids.empty()) return {};  // CPU

  std::vector<int> ordinal = match_distinct(local);
  // Ranks left without a device of their own go to the least-loaded one they see (a
  // conflict, named below).
  std::map<std::string, int> load;
  for (size_t r = 0; r < local.size(); ++r)
    if (ordinal[r] >= 0) ++load[local[r].ids[static_cast<size_t>(ordinal[r])]];
  for (size_t r = 0; r < local.size(); ++r) {
    if (ordinal[r] >= 0 || local[r].ids.empty()) continue;
    size_t best = 0;
    for (size_t o = 1; o < local[r].ids.size(); ++o)
      if (load[local[r].ids[o]] < load[local[r].ids[best]]) best = o;
    ordinal[r] = static_cast<int>(best);
    ++load[local[r].ids[best]];
  }
  auto id_of = [&](size_t r) { return ordinal[r] < 0 ? std::string() : local[r].ids[static_cast<size_t>(ordinal[r])]; };

  for (size_t r = 0; r < local.size() && !allow_sharing; ++r) {
    if (ordinal[r] < 0 || load[id_of(r)] < 2) continue;
    std::vector<int> group;
    std::set<std::string> distinct;
    int with_gpu = 0;
    for (size_t q = 0; q < local.size(); ++q) {
      if (id_of(q) == id_of(r)) group.push_back(static_cast<int>(q));
      if (!local[q].ids.empty()) ++with_gpu;
      distinct.insert(local[q].ids.begin(), local[q].ids.end());
    }
    const size_t m = distinct.size();
    fail("local ranks ", join_ranks(group), " on ", host, " would share one GPU (", id_of(r), "): ", with_gpu,
         " ranks on this node see ", m,
         " distinct GPU(s) between them, and NCCL and the GPU model need a GPU "
         "of their own per rank. Start at most ",
         m,
         " task(s) per node with every GPU of the node visible to "
         "each (srun --ntasks-per-node=",
         m, " --gres=gpu:", m,
         ", without --gpus-per-task/--gpu-bind; cnnscale picks one GPU per rank), make Slurm give each task a "
         "different GPU, share the GPUs over a host data plane with --device cuda --backend mpi (or gloo), "
         "or train on the CPU with --backend mpi");
  }

  DeviceChoice choice;
  choice.device = ordinal[me];
  choice.id = id_of(me);
  choice.sharing = load[choice.id];
  return choice;
}

VisibleDevices query_visible_devices() {
  VisibleDevices v;
  for (const CudaDevice& d : probe_cuda().devices) v.ids.push_back(d.id());
  return v;
}

int cuda_device_count() { return static_cast<int>(probe_cuda().devices.size()); }

std::string cuda_device_product(int device) {
  const auto& devs = probe_cuda().devices;
  if (device < 0 || static_cast<size_t>(device) >= devs.size()) return "";
  return devs[static_cast<size_t>(device)].name;
}

std::string device_name(int device) {
  if (device < 0) return "cpu";
  const std::string product = cuda_device_product(device);
  if (!product.empty()) return "cuda:" + std::to_string(device) + " (" + product + ")";
  return "cuda:" + std::to_string(device);
}

}  // namespace cnnscale
