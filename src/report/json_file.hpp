// json_file.hpp — a JSON file the report reads (run.json, `cnnscale allreduce --json`,
// `cnnscale data-bench --json`), parsed whole; the errors name the file.
//
// Bounded (issue 39): at most kMaxInputBytes, checked before reading (and while reading,
// for a file whose size is not known ahead, such as a FIFO). These files are KiB — a
// data-bench or allreduce result 1–5 KiB, a run.json 3 KiB at one rank plus ~25 bytes per
// rank — and the parsed document takes about 6× the text: a 300 MB --data-bench file took
// 1.76 GB of memory before it was refused for its content. The same bound holds for the
// --points CSV and for the run.json that `cnnscale watch` reads.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace cnnscale::report {

constexpr uint64_t kMaxInputBytes = uint64_t{16} << 20;  // 16 MiB

// The file's text. UserError `cannot_read` when it cannot be opened; "PATH: is a
// directory, not a file" for one; "PATH: N MiB; cnnscale reads at most 16.0 MiB …<suffix>"
// past the bound.
std::string read_input_text(const std::string& path, const std::string& cannot_read, const std::string& suffix = "");

// The parsed file. UserError `cannot_read` when it cannot be opened, the size error
// above, and "PATH: malformed JSON (<parser's reason>)<malformed_suffix>" when it does
// not parse.
nlohmann::json read_json_file(const std::string& path, const std::string& cannot_read,
                              const std::string& malformed_suffix = "");

}  // namespace cnnscale::report
