// run_files.hpp — the run directory's files (rank 0 writes them): metrics.jsonl, one
// JSON object per line, appended and flushed as training goes; run.json, the summary
// `cnnscale report` reads, written atomically at the end.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace cnnscale {

class MetricsLog {
 public:
  MetricsLog() = default;
  ~MetricsLog();
  // Opens run_dir/metrics.jsonl for appending (creates run_dir); no-op when run_dir is empty.
  void open(const std::string& run_dir);
  void append(const nlohmann::json& record);

 private:
  std::FILE* f_ = nullptr;
};

// Creates the directory (and parents); throws UserError naming it on failure.
void ensure_directory(const std::string& dir, const std::string& what);

void write_run_json(const std::string& run_dir, const nlohmann::json& summary);

}  // namespace cnnscale
