// run_files.cpp — see run_files.hpp.
#include "train/run_files.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/atomic_file.hpp"
#include "util/error.hpp"

namespace cnnscale {

void ensure_directory(const std::string& dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("cannot create ", what, " '", dir, "': ", ec.message(), "; choose a writable location");
}

MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}

void MetricsLog::open(const std::string& run_dir) {
  if (run_dir.empty()) return;
  ensure_directory(run_dir, "run directory (--run-dir)");
  const std::string path = run_dir + "/metrics.jsonl";
  f_ = std::fopen(path.c_str(), "a");
  if (!f_) fail("cannot write '", path, "': ", std::strerror(errno), "; choose a writable --run-dir");
}

void MetricsLog::append(const nlohmann::json& record) {
  if (!f_) return;
  const std::string line = record.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), f_);
  std::fflush(f_);
}

void write_run_json(const std::string& run_dir, const nlohmann::json& summary) {
  if (run_dir.empty()) return;
  write_file_atomic(run_dir + "/run.json", summary.dump(2) + "\n");
}

}  // namespace cnnscale
