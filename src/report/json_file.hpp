// json_file.hpp — a JSON file the report reads (run.json, `cnnscale allreduce --json`,
// `cnnscale data-bench --json`), parsed whole; the errors name the file.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace cnnscale::report {

// The parsed file. UserError `cannot_read` when it cannot be opened, and
// "PATH: malformed JSON (<parser's reason>)<malformed_suffix>" when it does not parse.
nlohmann::json read_json_file(const std::string& path, const std::string& cannot_read,
                              const std::string& malformed_suffix = "");

}  // namespace cnnscale::report
