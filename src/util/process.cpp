// process.cpp — see process.hpp.
#include "util/process.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
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
    if (!(f >> mode >> rw >> pid >> file) || file != id || pid < 0) continue;
    pids.push_back(pid);
  }
  return pids;
}

std::vector<long> namespace_pids(long pid) {
  std::vector<long> pids;
  if (pid <= 0) return pids;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    std::istringstream f(line.substr(6));
    for (long p; f >> p;) pids.push_back(p);
    break;
  }
  return pids;
}

std::string process_name(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

std::string describe_process(long pid) {
  const std::string name = process_name(pid);
  return "pid " + std::to_string(pid) + (name.empty() ? "" : " (" + name + ")");
}

std::string lock_taken_by_other(const std::string& path, const std::string& host, long pid) {
  if (!process_gone(host, pid)) return "";
  const std::vector<long> holders = lock_holder_pids(path);
  std::string who;
  for (const long h : holders) {
    if (h <= 0) return "";  // a holder in a pid namespace this one cannot see: maybe the training
    const std::vector<long> ns = namespace_pids(h);
    if (ns.empty()) {
      // The kernel names the process that took the lock, translated into this namespace.
      // There but unreadable (hidepid): not known. Gone: a child that inherited its
      // descriptor holds the lock, and the recorded training is dead — not the run.
      std::error_code ec;
      if (std::filesystem::exists("/proc/" + std::to_string(h), ec) || ec) return "";
      who += (who.empty() ? "" : ", ") + std::string("a process that inherited the lock of pid ") +
             std::to_string(h) + " (gone)";
      continue;
    }
    if (std::find(ns.begin(), ns.end(), pid) != ns.end()) return "";  // the recorded training itself
    who += (who.empty() ? "" : ", ") + describe_process(h);
  }
  return who;
}

}  // namespace cnnscale
