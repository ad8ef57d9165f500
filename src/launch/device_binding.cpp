// device_binding.cpp — see device_binding.hpp.
#include "launch/device_binding.hpp"

#include <cstdlib>

#include "launch/cuda_devices.hpp"
#include "util/error.hpp"

namespace cnnscale {

DeviceChoice choose_device(const std::vector<VisibleDevices>& local, int my_local_rank,
                           bool allow_sharing, const std::string& host) {
  DeviceChoice choice;
  const VisibleDevices& mine = local.at(static_cast<size_t>(my_local_rank));
  if (mine.count <= 0) return choice;  // CPU
  int peers = 0, my_index = 0;
  for (size_t i = 0; i < local.size(); ++i) {
    if (local[i].key != mine.key) continue;
    if (static_cast<int>(i) == my_local_rank) my_index = peers;
    ++peers;
  }
  if (peers > mine.count && !allow_sharing)
    fail(peers, " ranks on ", host, " see the same ", mine.count, " GPU(s) (CUDA_VISIBLE_DEVICES=", mine.key,
         "): more ranks than GPUs. Start one task per GPU (e.g. srun --ntasks-per-node=", mine.count,
         " or --gpus-per-task=1), or pass --allow-gpu-sharing to put several ranks on one GPU");
  choice.device = my_index % mine.count;
  choice.ranks_on_device = (peers + mine.count - 1 - choice.device) / mine.count;
  return choice;
}

VisibleDevices query_visible_devices() {
  VisibleDevices v;
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  v.key = cvd ? cvd : "(all)";
  v.count = cuda_device_count();
  return v;
}

std::string device_name(int device) {
  if (device < 0) return "cpu";
  const std::string product = cuda_device_product(device);
  if (!product.empty()) return "cuda:" + std::to_string(device) + " (" + product + ")";
  return "cuda:" + std::to_string(device);
}

}  // namespace cnnscale
