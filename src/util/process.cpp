// process.cpp — see process.hpp.
#include "util/process.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace cnnscale {

std::string this_host() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

bool process_gone(const std::string& host, long pid) {
  if (pid <= 0 || host.empty() || host != this_host()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

std::vector<long> lock_holder_pids(const std::string& path) {
  std::vector<long> pids;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return pids;
  char id[64];
  std::snprintf(id, sizeof(id), "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  // "1: FLOCK  ADVISORY  WRITE 21375 fe:00:10953778 0 EOF"; waiters read "1: -> FLOCK ...".
  std::ifstream in("/proc/locks");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string n, type, mode, rw, file;
    long pid = 0;
    if (!(f >> n >> type) || type == "->") continue;
    if (!(f >> mode >> rw >> pid >> file) || file != id || pid <= 0) continue;
    pids.push_back(pid);
  }
  return pids;
}

std::string process_name(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace cnnscale
