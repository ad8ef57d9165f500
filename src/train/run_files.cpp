// run_files.cpp — see run_files.hpp.
#include "train/run_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace cnnscale {

void ensure_directory(const std::string& dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("cannot create ", what, " '", dir, "': ", ec.message(), "; choose a writable location");
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::open(const std::string& run_dir) {
  if (run_dir.empty()) return;
  ensure_directory(run_dir, "run directory (--run-dir)");
  path_ = run_dir + "/metrics.jsonl";
  // O_NOFOLLOW: appended to in place, so never through a link (issue 48; RunDir checked
  // the directory, this covers a link put there since).
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0 && errno == ELOOP)
    fail("cannot write '", path_, "': it is a symbolic link, and cnnscale appends to metrics.jsonl only in the run "
         "directory itself; remove the link, or choose a --run-dir you own");
  if (fd_ < 0) fail("cannot write '", path_, "': ", std::strerror(errno), "; choose a writable --run-dir");
}

void MetricsLog::append(const nlohmann::json& record) {
  if (fd_ < 0) return;
  const std::string line = record.dump() + "\n";
  std::lock_guard<std::mutex> lock(mutex_);
  const int err = append_whole(fd_, line);
  if (!err) {
    ++written_;
    return;
  }
  if (lost_++ == 0) {
    error_ = std::strerror(err);
    log_warn("cannot append to " + path_ + ": " + error_ +
             "; metrics lines are being lost (counted in run.json as metrics_lines_lost; the run will end "
             "with an error). Free space on that file system");
  }
}

void write_run_json(const std::string& run_dir, const nlohmann::json& summary) {
  if (run_dir.empty()) return;
  write_file_atomic(run_dir + "/run.json", summary.dump(2) + "\n");
}

}  // namespace cnnscale
