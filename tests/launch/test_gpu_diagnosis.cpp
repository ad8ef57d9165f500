// Why a rank has no GPU, from injected CUDA probes, environments and /dev listings:
// the CUDA error text, versions and fix survive into the explanation; GPU-presence
// hints come from /dev/nvidiaN and the Slurm/CUDA variables, and only from those.
#include <gtest/gtest.h>

#include "launch/gpu_diagnosis.hpp"

using namespace cnnscale;

namespace {

CudaProbe insufficient(int driver) {
  CudaProbe p;
  p.built = true;
  p.runtime_version = 13000;
  p.driver_version = driver;
  p.error_name = "cudaErrorInsufficientDriver";
  p.error = "CUDA driver version is insufficient for CUDA runtime version";
  return p;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(GpuDiagnosis, Versions) {
  EXPECT_EQ(cuda_version_string(13000), "13.0");
  EXPECT_EQ(cuda_version_string(12040), "12.4");
  EXPECT_EQ(cuda_version_string(0), "none");
  EXPECT_EQ(min_driver_branch(13000), 580);
  EXPECT_EQ(min_driver_branch(12080), 525);
  EXPECT_EQ(min_driver_branch(9000), 0);
}

TEST(GpuDiagnosis, OldDriverKeepsCudaTextVersionsAndFix) {
  const std::string m = explain_no_gpu(insufficient(12040), "535.104.05");
  EXPECT_TRUE(has(m, "cudaGetDeviceCount failed: CUDA driver version is insufficient for CUDA runtime version "
                     "(cudaErrorInsufficientDriver)"))
      << m;
  EXPECT_TRUE(has(m, "CUDA 13.0 runtime")) << m;
  EXPECT_TRUE(has(m, "supports CUDA up to 12.4 (cudaDriverGetVersion 12040)")) << m;
  EXPECT_TRUE(has(m, "kernel module 535.104.05")) << m;
  EXPECT_TRUE(has(m, "R580 or newer")) << m;
  EXPECT_TRUE(has(m, "rebuild cnnscale against the cluster's CUDA")) << m;
}

TEST(GpuDiagnosis, NoDriverAtAllSaysSo) {
  const std::string m = explain_no_gpu(insufficient(0), "");
  EXPECT_TRUE(has(m, "CUDA driver version is insufficient for CUDA runtime version")) << m;
  EXPECT_TRUE(has(m, "no NVIDIA driver could be loaded (cudaDriverGetVersion 0")) << m;
  EXPECT_FALSE(has(m, "kernel module")) << m;
  EXPECT_TRUE(has(m, "R580 or newer")) << m;
}

TEST(GpuDiagnosis, NoDeviceAndOtherErrors) {
  CudaProbe p;
  p.built = true;
  p.runtime_version = 13000;
  p.driver_version = 13000;
  p.error_name = "cudaErrorNoDevice";
  p.error = "no CUDA-capable device is detected";
  std::string m = explain_no_gpu(p, "");
  EXPECT_TRUE(has(m, "no CUDA-capable device is detected (cudaErrorNoDevice)")) << m;
  EXPECT_TRUE(has(m, "--gres=gpu:N")) << m;
  EXPECT_FALSE(has(m, "R580")) << m;
  p.error_name = "cudaErrorDevicesUnavailable";
  p.error = "CUDA-capable device(s) is/are busy or unavailable";
  m = explain_no_gpu(p, "");
  EXPECT_TRUE(has(m, "busy or unavailable (cudaErrorDevicesUnavailable)")) << m;
  EXPECT_TRUE(has(m, "nvidia-smi")) << m;
}

TEST(GpuDiagnosis, BuildWithoutCudaAndDevicesPresent) {
  EXPECT_TRUE(has(explain_no_gpu(CudaProbe{}, ""), "built without CUDA"));
  CudaProbe ok;
  ok.built = true;
  ok.devices.push_back({"H100", "GPU-aaaa", "0000:17:00.0"});
  EXPECT_EQ(explain_no_gpu(ok, ""), "");
}

TEST(GpuDiagnosis, DeviceIdPrefersUuid) {
  EXPECT_EQ((CudaDevice{"x", "GPU-1", "0000:17:00.0"}.id()), "GPU-1");
  EXPECT_EQ((CudaDevice{"x", "", "0000:17:00.0"}.id()), "pci:0000:17:00.0");
}

TEST(GpuDiagnosis, KernelModuleVersion) {
  EXPECT_EQ(parse_nvidia_kernel_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 "
                                        "01:15:15 UTC 2023"),
            "535.104.05");
  EXPECT_EQ(parse_nvidia_kernel_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  "
                                        "Release Build"),
            "580.65.06");
  EXPECT_EQ(parse_nvidia_kernel_version(""), "");
}

TEST(GpuDiagnosis, HintsFromDevAndEnvironment) {
  const auto none = gpu_presence_hints(map_env({}), {"nvidiactl", "nvidia-uvm", "nvidia-caps"});
  EXPECT_TRUE(none.empty()) << join_hints(none);
  EXPECT_TRUE(gpu_presence_hints(map_env({{"CUDA_VISIBLE_DEVICES", ""}}), {}).empty());
  EXPECT_TRUE(gpu_presence_hints(map_env({{"CUDA_VISIBLE_DEVICES", "-1"}}), {}).empty());
  EXPECT_TRUE(gpu_presence_hints(map_env({{"CUDA_VISIBLE_DEVICES", "NoDevFiles"}}), {}).empty());
  EXPECT_TRUE(gpu_presence_hints(map_env({{"SLURM_GPUS_ON_NODE", "0"}}), {}).empty());

  EXPECT_EQ(join_hints(gpu_presence_hints(map_env({}), {"nvidia0", "nvidia1", "nvidiactl"})),
            "/dev/nvidia0 /dev/nvidia1");
  EXPECT_EQ(
      join_hints(gpu_presence_hints(map_env({}), {"nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidia4", "nvidia5"})),
      "/dev/nvidia0 /dev/nvidia1 /dev/nvidia2 /dev/nvidia3 (6 in all)");
  EXPECT_EQ(join_hints(gpu_presence_hints(map_env({{"SLURM_JOB_GPUS", "0,1"},
                                                   {"SLURM_STEP_GPUS", "1"},
                                                   {"SLURM_GPUS_ON_NODE", "2"},
                                                   {"CUDA_VISIBLE_DEVICES", "1"}}),
                                          {})),
            "SLURM_JOB_GPUS=0,1; SLURM_STEP_GPUS=1; SLURM_GPUS_ON_NODE=2; CUDA_VISIBLE_DEVICES=1");
}

TEST(GpuDiagnosis, ListsDevEntriesOfADirectory) {
  const auto here = list_nvidia_dev_entries("/nonexistent-dir-for-test");
  EXPECT_TRUE(here.empty());
}
