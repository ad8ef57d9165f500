// device_binding.hpp — which GPU each local rank uses.
//
// Each rank on a node reports the devices it can see (the CUDA_VISIBLE_DEVICES value
// Slurm or the user set, and how many devices CUDA enumerates). Ranks that see the
// same set share it: the k-th of them takes device k. This is right both for
// one-task-per-GPU binding (--gpus-per-task, --gpu-bind: each rank sees one device,
// index 0) and for a node-wide set (each rank sees all, takes its own). More ranks
// than devices in a set is an error unless sharing is allowed.
#pragma once
#include <string>
#include <vector>

namespace cnnscale {

struct VisibleDevices {
  std::string key;   // CUDA_VISIBLE_DEVICES value, or "(all)" when unset
  int count = 0;     // devices CUDA enumerates; 0 = no usable GPU
};

struct DeviceChoice {
  int device = -1;   // CUDA ordinal within this rank's visible set; -1 = CPU
  int ranks_on_device = 1;
};

// local: every local rank's view, indexed by local rank. Throws UserError when
// ranks would have to share devices and allow_sharing is false.
DeviceChoice choose_device(const std::vector<VisibleDevices>& local, int my_local_rank,
                           bool allow_sharing, const std::string& host);

// This process's view: CUDA_VISIBLE_DEVICES and cudaGetDeviceCount (any CUDA
// failure, e.g. no driver, counts as no GPU). Without the CUDA build: count 0.
VisibleDevices query_visible_devices();

// Human-readable name of device ordinal d ("cpu" for -1).
std::string device_name(int device);

}  // namespace cnnscale
