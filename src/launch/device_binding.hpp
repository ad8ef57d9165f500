// device_binding.hpp — which GPU each local rank uses.
//
// Each rank on a node reports the physical identity (CudaDevice::id(): UUID, else PCI bus
// id) of every device it can see, by ordinal. Ranks are matched to distinct physical
// devices, each taking an ordinal of its own view:
//   - every rank sees all the node's GPUs (--gres=gpu:N, or CUDA_VISIBLE_DEVICES=2,3 for
//     all): local rank i takes ordinal i;
//   - each task sees only its own GPU (--gpus-per-task=1, --gpu-bind): ordinal 0 each,
//     and that is fine as long as the UUIDs differ.
// Why UUIDs and not CUDA_VISIBLE_DEVICES strings: under per-task binding every task sees
// "ordinal 0", and Slurm may or may not renumber CUDA_VISIBLE_DEVICES, so comparing the
// strings gave a false "more ranks than GPUs" (issue 18). Only two ranks on the same
// physical device are a conflict: a UserError naming them and the fix, unless the ranks'
// gradients go over a host plane (`--device cuda --backend mpi|gloo`, issue 38: each rank
// its own CUDA context and stream on the shared GPU, the sums on the host), which allows
// it (allow_sharing) and says so once. NCCL refuses two ranks on one device, so with NCCL
// there is no way to allow it (--allow-gpu-sharing, which let the binding through only for
// NCCL to refuse it, was removed in issue 28).
#pragma once
#include <string>
#include <vector>

namespace cnnscale {

// One rank's view: physical ids by visible ordinal; empty = no usable GPU.
struct VisibleDevices {
  std::vector<std::string> ids;
};

struct DeviceChoice {
  int device = -1;           // CUDA ordinal within this rank's visible set; -1 = CPU
  std::string id;            // its physical id; "" for the CPU
  int sharing = 1;           // local ranks on that device (more than 1 only with allow_sharing)
};

// local: every local rank's view, indexed by local rank (each rank computes the same
// assignment from the same gathered views). Throws UserError when two ranks would share
// a physical device, unless allow_sharing (the host data plane): then the ranks without a
// device of their own go to the least-loaded one they see, as evenly as the views allow.
DeviceChoice choose_device(const std::vector<VisibleDevices>& local, int my_local_rank, const std::string& host,
                           bool allow_sharing = false);

// This process's view (launch/cuda_devices.hpp probe_cuda()): empty when CUDA failed or
// without the CUDA build; the reason is explain_no_gpu() (launch/gpu_diagnosis.hpp).
VisibleDevices query_visible_devices();

// Human-readable name of device ordinal d ("cpu" for -1), e.g. "cuda:0 (NVIDIA H100 80GB HBM3)".
std::string device_name(int device);

}  // namespace cnnscale
