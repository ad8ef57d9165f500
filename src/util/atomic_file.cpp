// atomic_file.cpp — see atomic_file.hpp.
#include "util/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "util/error.hpp"
#include "util/process.hpp"

namespace cnnscale {
namespace {

namespace fs = std::filesystem;

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISSOCK(m)) return "a socket";
  return "a special file";
}

constexpr const char* kRule =
    "cnnscale replaces an output file whole (a new file renamed over it), so it writes only regular files (and "
    "through a symbolic link to one); give the path of a regular file or of a new one";

// The file to replace for `path` (see the header's rule): "" and *why when it is refused.
std::string resolve_output(const std::string& path, std::string* why) {
  std::string p = path;
  for (int hops = 0; hops <= 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return p;  // a new file (a missing folder is the write's error)
      *why = std::strerror(errno);
      return "";
    }
    if (S_ISREG(st.st_mode)) return p;
    if (!S_ISLNK(st.st_mode)) {
      *why = std::string("it is ") + (p == path ? "" : "a symbolic link to '" + p + "', ") + kind_of(st.st_mode) +
             ", not a regular file: " + kRule;
      return "";
    }
    std::error_code ec;
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) {
      *why = "cannot read the symbolic link '" + p + "': " + ec.message();
      return "";
    }
    p = to.is_absolute() ? to.string() : (fs::path(p).parent_path() / to).string();
  }
  *why = "it is a loop of symbolic links (more than 40 in a row): " + std::string(kRule);
  return "";
}

}  // namespace

std::string output_target(const std::string& path) {
  std::string why;
  const std::string target = resolve_output(path, &why);
  if (target.empty()) fail("cannot write '", path, "': ", why);
  return target;
}

void check_output_file(const std::string& path, const std::string& option) {
  std::string why;
  const std::string target = resolve_output(path, &why);
  if (target.empty()) fail("cannot write ", option, " '", path, "': ", why);
  const std::string folder = fs::path(target).has_parent_path() ? fs::path(target).parent_path().string() : ".";
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail("cannot write ", option, " '", path, "': its folder '", folder,
         "' does not exist (or is not a folder); create it first or choose another path");
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    fail("cannot write ", option, " '", path, "': no permission to create files in its folder '", folder, "' (",
         std::strerror(errno), "); choose another path");
}

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
    if (!process_gone(writer_host, std::stol(pid))) continue;
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
  const std::string target = output_target(path);  // path, or where its symbolic link leads
  const std::string tmp = target + ".tmp." + this_host() + "." + std::to_string(::getpid());
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
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot write '", path, "': ", std::strerror(err));
  }
  fsync_directory(fs::path(target).parent_path().string());
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
