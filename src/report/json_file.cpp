// json_file.cpp — see json_file.hpp.
#include "report/json_file.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "util/error.hpp"
#include "util/json_bounded.hpp"

namespace cnnscale::report {
namespace {

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

[[noreturn]] void too_big(const std::string& path, const std::string& size, const std::string& suffix) {
  fail(path, ": ", size, "; cnnscale reads at most ", mib(kMaxInputBytes),
       " from one input file (run.json, --allreduce and --data-bench results are KiB, --points a line per point)",
       suffix.empty() ? std::string(": is it the right file?") : suffix);
}

}  // namespace

std::string read_input_text(const std::string& path, const std::string& cannot_read, const std::string& suffix) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, ": is a directory, not a file", suffix);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(cannot_read);
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxInputBytes) too_big(path, mib(size), suffix);
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxInputBytes) too_big(path, "more than " + mib(kMaxInputBytes), suffix);
  }
  return text;
}

nlohmann::json read_json_file(const std::string& path, const std::string& cannot_read,
                              const std::string& malformed_suffix) {
  const std::string text = read_input_text(path, cannot_read, malformed_suffix);
  try {
    return parse_json(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e400
    fail(path, ": malformed JSON (", e.what(), ")", malformed_suffix);
  }
}

}  // namespace cnnscale::report
