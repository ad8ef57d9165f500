// atomic_file.cpp — see atomic_file.hpp.
#include "util/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "util/error.hpp"

namespace cnnscale {
namespace {

std::string this_host() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// True unless process `pid` certainly does not exist on this host.
bool process_may_exist(long pid) {
  if (pid <= 0) return true;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH;
}

}  // namespace

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  const std::string host = this_host();
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t tmp = name.rfind(".tmp.");
    const size_t dot = name.rfind('.');
    if (tmp == std::string::npos || dot < tmp + 4 || !e.is_regular_file(ec)) continue;
    const std::string pid = name.substr(dot + 1);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    // "<name>.tmp.<host>.<pid>"; "<name>.tmp.<pid>" (cnnscale 0.1) counts as this host's.
    const std::string writer_host = dot > tmp + 4 ? name.substr(tmp + 5, dot - tmp - 5) : host;
    if (writer_host != host || process_may_exist(std::stol(pid))) continue;
    if (std::filesystem::remove(e.path(), ec)) removed.push_back(name);
  }
  return removed;
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_file_atomic(path, content.data(), content.size());
}

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  const std::string tmp = path + ".tmp." + this_host() + "." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail("cannot write '", path, "': ", std::strerror(errno));
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("cannot write '", path, "': ", std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot write '", path, "': ", std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot write '", path, "': ", std::strerror(err));
  }
  fsync_directory(std::filesystem::path(path).parent_path().string());
}

int append_whole(int fd, const std::string& bytes) {
  const off_t before = ::lseek(fd, 0, SEEK_END);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      if (done > 0 && before >= 0) {
        [[maybe_unused]] const int cut = ::ftruncate(fd, before);
      }
      return err;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace cnnscale
