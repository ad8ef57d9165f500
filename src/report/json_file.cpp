// json_file.cpp — see json_file.hpp.
#include "report/json_file.hpp"

#include <fstream>
#include <sstream>

#include "util/error.hpp"

namespace cnnscale::report {

nlohmann::json read_json_file(const std::string& path, const std::string& cannot_read,
                              const std::string& malformed_suffix) {
  std::ifstream in(path);
  if (!in) fail(cannot_read);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    fail(path, ": malformed JSON (", e.what(), ")", malformed_suffix);
  }
}

}  // namespace cnnscale::report
