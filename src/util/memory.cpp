// memory.cpp — see memory.hpp.
#include "util/memory.hpp"

#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace cnnscale {
namespace {

// A "Key:   123 kB" line of /proc/meminfo or /proc/self/status, in bytes (0 if absent).
uint64_t proc_kb(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, key.size() + 1, key + ":") == 0) return std::stoull(line.substr(key.size() + 1)) * 1024;
  return 0;
}

// The first number in a one-line file ("max" and missing files give UINT64_MAX).
uint64_t file_number(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return UINT64_MAX;
  try {
    return std::stoull(s);
  } catch (...) {
    return UINT64_MAX;
  }
}

// This process's cgroup v2 directory ("0::/path" in /proc/self/cgroup).
std::string cgroup_dir() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + line.substr(3);
  return "";
}

}  // namespace

std::string format_bytes(uint64_t b) {
  char buf[32];
  const double d = static_cast<double>(b);
  if (b >= (uint64_t{1} << 30)) std::snprintf(buf, sizeof(buf), "%.1f GiB", d / (1 << 30));
  else if (b >= (uint64_t{1} << 20)) std::snprintf(buf, sizeof(buf), "%.0f MiB", d / (1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof(buf), "%.0f KiB", d / 1024);
  else std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

MemoryLimit memory_limit() {
  MemoryLimit out;
  auto consider = [&](uint64_t bytes, const std::string& source) {
    if (bytes < out.bytes) out = {bytes, source};
  };
  rlimit rl{};
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const uint64_t used = proc_kb("/proc/self/status", "VmSize");
    const uint64_t lim = rl.rlim_cur;
    consider(lim > used ? lim - used : 0,
             "ulimit -v " + format_bytes(lim) + ", " + format_bytes(used) + " of it already mapped");
  }
  const std::string cg = cgroup_dir();
  if (!cg.empty()) {
    const uint64_t max = file_number(cg + "/memory.max");
    if (max != UINT64_MAX) {
      const uint64_t cur = file_number(cg + "/memory.current");
      const uint64_t used = cur == UINT64_MAX ? 0 : cur;
      consider(max > used ? max - used : 0, "the cgroup's memory.max " + format_bytes(max) + " (Slurm --mem or the "
                                            "container), " + format_bytes(used) + " of it in use");
    }
  }
  const uint64_t avail = proc_kb("/proc/meminfo", "MemAvailable");
  if (avail > 0) {
    const uint64_t swap = proc_kb("/proc/meminfo", "SwapFree");
    consider(avail + swap, std::string(swap ? "MemAvailable + SwapFree" : "MemAvailable") + " of this node");
  }
  return out;
}

std::string out_of_memory_message(const std::string& what, uint64_t bytes, const std::string& hint) {
  std::ostringstream os;
  os << "out of memory while " << what << ": ";
  if (bytes > 0) os << format_bytes(bytes) << " asked, ";
  const MemoryLimit lim = memory_limit();
  if (lim.bytes != UINT64_MAX) os << "at most " << format_bytes(lim.bytes) << " available (" << lim.source << ")";
  else os << "no limit known";
  if (!hint.empty()) os << "; " << hint;
  return os.str();
}

void check_memory(const std::string& what, uint64_t bytes, const std::string& hint) {
  const MemoryLimit lim = memory_limit();
  if (bytes > lim.bytes) throw UserError(out_of_memory_message(what, bytes, hint));
}

}  // namespace cnnscale
