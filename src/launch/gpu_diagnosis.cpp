// gpu_diagnosis.cpp — see gpu_diagnosis.hpp.
#include "launch/gpu_diagnosis.hpp"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace cnnscale {
namespace {

bool is_nvidia_device_node(const std::string& name) {  // nvidia0, nvidia1, ... (not nvidiactl, nvidia-uvm)
  if (name.size() <= 6 || name.compare(0, 6, "nvidia") != 0) return false;
  return std::all_of(name.begin() + 6, name.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// A CUDA_VISIBLE_DEVICES value that names at least one device ("" / "-1" / "NoDevFiles" hide all).
bool names_devices(const std::string& v) {
  if (v.empty() || v == "NoDevFiles" || v == "none") return false;
  return v.compare(0, 2, "-1") != 0;  // CUDA stops at the first invalid index
}

}  // namespace

std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

int min_driver_branch(int cuda_version) {
  switch (cuda_version / 1000) {
    case 13: return 580;
    case 12: return 525;
    case 11: return 450;
    default: return 0;
  }
}

std::string parse_nvidia_kernel_version(const std::string& proc_text) {
  std::istringstream in(proc_text);
  std::string word;
  while (in >> word) {  // the first word shaped like 535.104.05
    if (word.empty() || !std::isdigit(static_cast<unsigned char>(word[0]))) continue;
    if (word.find('.') == std::string::npos) continue;
    if (std::all_of(word.begin(), word.end(), [](unsigned char c) { return std::isdigit(c) || c == '.'; })) return word;
  }
  return "";
}

std::string read_nvidia_kernel_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  if (!f) return "";
  std::string line;
  std::getline(f, line);
  return parse_nvidia_kernel_version(line);
}

std::string explain_no_gpu(const CudaProbe& p, const std::string& kernel_driver) {
  if (!p.built)
    return "this cnnscale was built without CUDA (CMake found no complete CUDA/cuDNN/cuBLAS/NCCL stack, or "
           "-DCNNSCALE_CUDA=OFF); rebuild it where the CUDA toolkit, cuDNN and NCCL are installed (docs/gpu.md)";
  if (p.error.empty() && !p.devices.empty()) return "";

  const std::string runtime = cuda_version_string(p.runtime_version);
  const int branch = min_driver_branch(p.runtime_version);
  std::ostringstream os;
  if (!p.error.empty()) os << "cudaGetDeviceCount failed: " << p.error << " (" << p.error_name << ")";
  else os << "CUDA enumerates no device";
  os << "; this cnnscale uses the CUDA " << runtime << " runtime (cudaRuntimeGetVersion " << p.runtime_version << ")";
  if (p.driver_version == 0)
    os << ", and no NVIDIA driver could be loaded (cudaDriverGetVersion 0: no libcuda.so.1 on this host or in "
          "this container)";
  else
    os << ", the installed driver supports CUDA up to " << cuda_version_string(p.driver_version)
       << " (cudaDriverGetVersion " << p.driver_version << ")";
  if (!kernel_driver.empty()) os << ", NVIDIA kernel module " << kernel_driver;

  const bool too_old =
      p.error_name == "cudaErrorInsufficientDriver" || (p.driver_version > 0 && p.driver_version < p.runtime_version);
  if (too_old) {
    os << ". Fix: run on GPU nodes whose NVIDIA driver is ";
    if (branch > 0) os << "R" << branch << " or newer (needed by CUDA " << p.runtime_version / 1000 << ")";
    else os << "new enough for CUDA " << runtime;
    os << ", or rebuild cnnscale against the cluster's CUDA (load its CUDA module, then cmake "
          "-DCMAKE_CUDA_COMPILER=$CUDA_HOME/bin/nvcc; docs/gpu.md)";
  } else if (p.error_name == "cudaErrorNoDevice" || p.error.empty()) {
    os << ". Fix: ask Slurm for GPUs (--gres=gpu:N), and check that CUDA_VISIBLE_DEVICES is not empty "
          "and nvidia-smi lists devices on this node";
  } else {
    os << ". Fix: run nvidia-smi on this node; the error above is CUDA's own";
  }
  return os.str();
}

std::vector<std::string> gpu_presence_hints(const EnvLookup& env, const std::vector<std::string>& dev_entries) {
  std::vector<std::string> hints;
  std::string nodes;
  int shown = 0, total = 0;
  for (const std::string& e : dev_entries) {
    if (!is_nvidia_device_node(e)) continue;
    if (++total > 4) continue;
    nodes += (shown++ ? " /dev/" : "/dev/") + e;
  }
  if (total > 4) nodes += " (" + std::to_string(total) + " in all)";
  if (total > 0) hints.push_back(nodes);
  for (const char* var : {"SLURM_JOB_GPUS", "SLURM_STEP_GPUS"})
    if (auto v = env(var); v && !v->empty()) hints.push_back(std::string(var) + "=" + *v);
  if (auto v = env("SLURM_GPUS_ON_NODE"); v && !v->empty() && *v != "0") hints.push_back("SLURM_GPUS_ON_NODE=" + *v);
  if (auto v = env("CUDA_VISIBLE_DEVICES"); v && names_devices(*v)) hints.push_back("CUDA_VISIBLE_DEVICES=" + *v);
  return hints;
}

std::vector<std::string> list_nvidia_dev_entries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.compare(0, 6, "nvidia") == 0) names.push_back(n);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string join_hints(const std::vector<std::string>& hints) {
  std::string s;
  for (const std::string& h : hints) s += (s.empty() ? "" : "; ") + h;
  return s;
}

}  // namespace cnnscale
