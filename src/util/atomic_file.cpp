// atomic_file.cpp — see atomic_file.hpp.
#include "util/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

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

constexpr int kMaxLinks = 40;  // the kernel's MAXSYMLINKS

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir == "/") return "/" + name;
  return dir + "/" + name;
}

// The folder above `dir`, a path without links ("" is the working folder).
std::string parent_of(const std::string& dir) {
  if (dir.empty()) return "..";
  if (dir == "/") return "/";
  const size_t slash = dir.rfind('/');
  const std::string last = slash == std::string::npos ? dir : dir.substr(slash + 1);
  if (last == "..") return dir + "/..";
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : dir.substr(0, slash);
}

// Pushes the components of `p` onto `todo` so that the first is on top ("" and "." dropped).
void push_components(const std::string& p, std::vector<std::string>* todo) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string part = p.substr(start, end - start);
    if (!part.empty() && part != ".") parts.push_back(part);
    start = end + 1;
  }
  todo->insert(todo->end(), parts.rbegin(), parts.rend());
}

// "" when the caller may follow the link `link` (lstat: `ls`) found in `folder`, by the
// kernel's fs.protected_symlinks rule; else why not, naming the link, its owner and the fix.
std::string refused_link(const std::string& link, const struct stat& ls, const std::string& folder, bool is_path) {
  struct stat ds {};
  const std::string where = folder.empty() ? "." : folder;
  if (::stat(where.c_str(), &ds) != 0)
    return "cannot check the folder '" + where + "' of the symbolic link '" + link + "': " + std::strerror(errno);
  const bool shared_sticky = (ds.st_mode & S_ISVTX) && (ds.st_mode & S_IWOTH);
  if (!shared_sticky || ls.st_uid == ::geteuid() || ls.st_uid == ds.st_uid) return "";
  return std::string(is_path ? "it is a symbolic link" : "it goes through the symbolic link '" + link + "',") +
         " owned by " + describe_uid(ls.st_uid) + ", in '" + where +
         "', a folder that anyone can write and that has the sticky bit (its owner: " + describe_uid(ds.st_uid) +
         "). A link there that is neither yours nor the folder owner's may have been planted by another user to send "
         "what cnnscale writes onto another file, so cnnscale does not follow it (nor would the kernel with "
         "fs.protected_symlinks=1). Remove the link (rm '" + link +
         "') if it is not what you meant, or give a path in a folder you own";
}

struct Walk {
  enum Outcome { found, refused, loop, failed } outcome = failed;
  std::string path;        // every link resolved (found)
  bool exists = false;     // something is at `path` (found); st is its lstat
  struct stat st {};
  bool through_link = false;  // a link was followed on the way
  std::string why;         // refused, failed
};

// Resolves `path` one component at a time, as the kernel does, following each symbolic
// link (at the end and among the folders) after checking it by refused_link().
Walk walk(const std::string& path) {
  Walk w;
  std::vector<std::string> todo;
  push_components(path, &todo);
  std::string cur = !path.empty() && path[0] == '/' ? "/" : "";
  int links = 0;
  while (!todo.empty()) {
    const std::string name = todo.back();
    todo.pop_back();
    if (name == "..") {
      cur = parent_of(cur);
      continue;
    }
    const std::string p = join(cur, name);
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno != ENOENT) {
        w.why = std::string(std::strerror(errno)) + (p == path ? "" : " ('" + p + "')");
        return w;
      }
      // Missing: a new file, or a missing folder (the write's error, or check_output_file's).
      w.path = p;
      while (!todo.empty()) {
        w.path = join(w.path, todo.back());
        todo.pop_back();
      }
      w.outcome = Walk::found;
      return w;
    }
    if (S_ISLNK(st.st_mode)) {
      if (++links > kMaxLinks) {
        w.outcome = Walk::loop;
        w.why = "it is a loop of symbolic links (more than 40 in a row)";
        return w;
      }
      w.why = refused_link(p, st, cur, p == path);
      if (!w.why.empty()) {
        w.outcome = Walk::refused;
        return w;
      }
      std::error_code ec;
      const fs::path to = fs::read_symlink(p, ec);
      if (ec) {
        w.why = "cannot read the symbolic link '" + p + "': " + ec.message();
        return w;
      }
      w.through_link = true;
      if (to.is_absolute()) cur.assign(1, '/');  // (not = "/": a false -Wrestrict of GCC 12)
      push_components(to.string(), &todo);
      continue;
    }
    if (todo.empty()) {
      w.outcome = Walk::found;
      w.path = p;
      w.exists = true;
      w.st = st;
      return w;
    }
    if (!S_ISDIR(st.st_mode)) {
      w.why = "'" + p + "' is not a folder";
      return w;
    }
    cur = p;
  }
  // Only folders ("/", "..", a path of "." and slashes): the end is the folder reached.
  w.path = cur.empty() ? "." : cur;
  if (::lstat(w.path.c_str(), &w.st) != 0) {
    w.why = std::strerror(errno);
    return w;
  }
  w.outcome = Walk::found;
  w.exists = true;
  return w;
}

// The file to replace for `path` (see the header's rule): "" and *why when it is refused.
std::string resolve_output(const std::string& path, std::string* why) {
  if (path.empty()) {
    *why = "no path given";
    return "";
  }
  if (path.back() == '/') {
    *why = std::string("the path ends with '/', so it names a folder: ") + kRule;
    return "";
  }
  const Walk w = walk(path);
  switch (w.outcome) {
    case Walk::found:
      break;
    case Walk::loop:
      *why = w.why + ": " + kRule;
      return "";
    case Walk::refused:
    case Walk::failed:
      *why = w.why;
      return "";
  }
  if (!w.exists || S_ISREG(w.st.st_mode)) return w.path;
  *why = std::string("it is ") + (w.through_link ? "a symbolic link to '" + w.path + "', " : "") +
         kind_of(w.st.st_mode) + ", not a regular file: " + kRule;
  return "";
}

std::function<std::string()>& suffix_source() {
  static std::function<std::string()> source;
  return source;
}

// 12 letters and digits, the first a letter (so that the pid before it is not taken for it).
std::string random_suffix() {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  unsigned char buf[12];
  size_t got = 0;
  while (got < sizeof(buf)) {
    const ssize_t n = ::getrandom(buf + got, sizeof(buf) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got < sizeof(buf)) {
    std::random_device rd;
    for (auto& b : buf) b = static_cast<unsigned char>(rd());
  }
  std::string s;
  s.push_back(kChars[buf[0] % 52]);
  for (size_t i = 1; i < sizeof(buf); ++i) s.push_back(kChars[buf[i] % 62]);
  return s;
}

bool is_pid(const std::string& s) {
  return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
}

bool is_random_part(const std::string& s) {
  return s.size() >= 6 && s.size() <= 32 && std::isalpha(static_cast<unsigned char>(s[0])) &&
         s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == std::string::npos;
}

// The writer a temporary file's name records: "<name>.tmp.<host>.<pid>.<random>", or the
// older "<name>.tmp.<host>.<pid>" and "<name>.tmp.<pid>" (cnnscale 0.1: this host's).
// pid 0 when `name` is no temporary file.
struct Writer {
  std::string host;
  long pid = 0;
};
Writer temporary_writer(const std::string& name, const std::string& here) {
  const size_t tmp = name.rfind(".tmp.");
  if (tmp == std::string::npos || tmp == 0) return {};
  const std::string rest = name.substr(tmp + 5);
  const size_t dot = rest.rfind('.');
  const std::string tail = dot == std::string::npos ? rest : rest.substr(dot + 1);
  const std::string head = dot == std::string::npos ? "" : rest.substr(0, dot);
  if (is_pid(tail)) return {head.empty() ? here : head, std::stol(tail)};
  if (!is_random_part(tail)) return {};
  const size_t d = head.rfind('.');
  if (d == std::string::npos || d == 0 || !is_pid(head.substr(d + 1))) return {};
  return {head.substr(0, d), std::stol(head.substr(d + 1))};
}

// A failed write: the temporary file goes, the error names the path the user gave.
[[noreturn]] void abandon(int fd, const std::string& tmp, const std::string& path, int err) {
  ::close(fd);
  ::unlink(tmp.c_str());
  fail("cannot write '", path, "': ", std::strerror(err));
}

}  // namespace

std::string describe_uid(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  const std::string n = "uid " + std::to_string(uid);
  if (::getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found && found->pw_name && *found->pw_name)
    return std::string(found->pw_name) + " (" + n + ")";
  return n;
}

std::string output_target(const std::string& path) {
  std::string why;
  const std::string target = resolve_output(path, &why);
  if (target.empty()) fail("cannot write '", path, "': ", why);
  return target;
}

std::string resolve_links(const std::string& path, const std::string& what) {
  const Walk w = walk(path);
  if (w.outcome != Walk::found) fail(what, " '", path, "': ", w.why);
  return w.path;
}

void check_own_directory(const std::string& dir, const std::string& what, const std::string& fix) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return;
  const uid_t me = ::geteuid();
  if (st.st_uid == me || st.st_uid == 0) return;
  fail(what, " '", dir, "' belongs to ", describe_uid(st.st_uid), ", not to you (you are ", describe_uid(me),
       "): its owner can replace, remove or link any name in it at any moment, so what cnnscale writes there could "
       "be sent onto other files; ", fix);
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

void set_temporary_suffix_source(std::function<std::string()> source) { suffix_source() = std::move(source); }

int create_temporary(const std::string& beside, mode_t mode, std::string* path) {
  const std::string prefix = beside + ".tmp." + this_host() + "." + std::to_string(::getpid()) + ".";
  for (int tries = 0; tries < 100; ++tries) {
    *path = prefix + (suffix_source() ? suffix_source()() : random_suffix());
    const int fd = ::open(path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  const std::string host = this_host();
  DIR* d = ::opendir(dir.c_str());
  if (!d) return removed;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const Writer w = temporary_writer(name, host);
    if (w.pid <= 0) continue;
    const std::string p = join(dir, name);
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // never a link, never through one
    if (!process_gone(w.host, w.pid)) continue;
    if (::unlink(p.c_str()) == 0) removed.push_back(name);
  }
  ::closedir(d);
  return removed;
}

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
  // A replaced file keeps its permission bits (never wider); a new one: 0666 less the umask.
  struct stat old {};
  const bool replacing = ::lstat(target.c_str(), &old) == 0 && S_ISREG(old.st_mode);
  const mode_t mode = replacing ? (old.st_mode & 0777) : 0666;
  std::string tmp;
  const int fd = create_temporary(target, mode, &tmp);
  if (fd < 0) fail("cannot write '", path, "': ", std::strerror(errno));
  // open() took the umask off; the replaced file's bits come back exactly (before any byte is written).
  if (replacing && ::fchmod(fd, mode) != 0) abandon(fd, tmp, path, errno);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) abandon(fd, tmp, path, errno);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) abandon(fd, tmp, path, errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("cannot write '", path, "': ", std::strerror(err));
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
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
