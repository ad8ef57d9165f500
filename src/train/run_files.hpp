// run_files.hpp — the run directory's files (rank 0 writes them): metrics.jsonl, one
// JSON object per line, appended as training goes; run.json, the summary `cnnscale
// report` reads, written atomically at the end.
//
// A metrics line is written whole or not at all (a failed or short write is cut back
// off the file, so the file stays valid JSON lines). A line that cannot be written (disk
// full, quota) is never lost silently: the first failure prints a warning with the OS's
// reason, every lost line is counted, run.json records the count (metrics_lines_lost)
// and the run ends with a non-zero status.
#pragma once
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace cnnscale {

class MetricsLog {
 public:
  MetricsLog() = default;
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  // Opens run_dir/metrics.jsonl for appending (creates run_dir), never through a symbolic
  // link (O_NOFOLLOW; UserError naming it); no-op when run_dir is empty.
  void open(const std::string& run_dir);
  void append(const nlohmann::json& record);  // thread-safe (rank 0's end record, train/run_end.hpp)
  int64_t lines_lost() const { return lost_; }
  int64_t lines_written() const { return written_; }
  const std::string& first_error() const { return error_; }  // "" or the OS's reason
  const std::string& path() const { return path_; }

 private:
  std::mutex mutex_;
  int fd_ = -1;
  std::string path_, error_;
  int64_t lost_ = 0, written_ = 0;
};

// Creates the directory (and parents); throws UserError naming it on failure.
void ensure_directory(const std::string& dir, const std::string& what);

void write_run_json(const std::string& run_dir, const nlohmann::json& summary);

}  // namespace cnnscale
