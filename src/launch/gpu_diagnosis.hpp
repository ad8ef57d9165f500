// gpu_diagnosis.hpp — why a rank has no GPU, in words a user can act on, and whether the
// node looks as if it had GPUs anyway (so that `--backend auto` does not fall back to the
// CPU in silence).
//
// Measured reason: this build links the CUDA 13 runtime, which needs an R580+ NVIDIA
// driver; on an R535–R570 node cudaGetDeviceCount fails with "CUDA driver version is
// insufficient for CUDA runtime version" (cudaErrorInsufficientDriver; the same error
// when no driver can be loaded at all, as on the machine this was written on). Before,
// that text was dropped and the rank simply counted as "no GPU".
//
// Everything here is pure (facts in, text out) so CPU tests can inject a probe, an
// environment and a /dev listing; the readers of the real facts are separate.
#pragma once
#include <string>
#include <vector>

#include "launch/cuda_devices.hpp"
#include "util/env.hpp"

namespace cnnscale {

// "13.0" for 13000 (cudaRuntimeGetVersion / cudaDriverGetVersion encoding), "none" for 0.
std::string cuda_version_string(int version);

// Oldest driver branch a CUDA major version runs on (minor-version compatibility):
// 13 → 580, 12 → 525, 11 → 450; 0 when unknown.
int min_driver_branch(int cuda_version);

// The NVIDIA kernel module's version from /proc/driver/nvidia/version text
// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  ..." → "535.104.05"),
// "" when absent. read_nvidia_kernel_version() reads the real file.
std::string parse_nvidia_kernel_version(const std::string& proc_text);
std::string read_nvidia_kernel_version();

// One sentence (no trailing period) on why CUDA gives this process no device: the CUDA
// error text and name, runtime and driver versions, and the fix. "" when the probe found
// devices. kernel_driver: read_nvidia_kernel_version() or "".
std::string explain_no_gpu(const CudaProbe& probe, const std::string& kernel_driver);

// Things outside CUDA that say this node has GPUs: /dev/nvidiaN entries (dev_entries are
// names in /dev, e.g. "nvidia0", "nvidiactl"), SLURM_JOB_GPUS, SLURM_STEP_GPUS,
// SLURM_GPUS_ON_NODE > 0, a CUDA_VISIBLE_DEVICES naming devices. Each hint reads like
// "/dev/nvidia0 /dev/nvidia1" or "SLURM_JOB_GPUS=0,1".
std::vector<std::string> gpu_presence_hints(const EnvLookup& env, const std::vector<std::string>& dev_entries);

// Names of the entries of `dir` that start with "nvidia" (sorted); none when unreadable.
std::vector<std::string> list_nvidia_dev_entries(const std::string& dir = "/dev");

// The hints joined with "; " ("" for none).
std::string join_hints(const std::vector<std::string>& hints);

}  // namespace cnnscale
