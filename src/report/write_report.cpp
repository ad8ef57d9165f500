// write_report.cpp — write_report(): the four output files into --output DIR.
#include <filesystem>

#include "report/renderers.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"

namespace cnnscale::report {

namespace {
const char* const kFiles[] = {"report.md", "report.html", "scaling.csv", "report.json"};
}

void check_report_output(const std::string& output_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(output_dir, ec) && !fs::is_directory(output_dir, ec))
    fail("cannot write the report into --output '", output_dir,
         "': it exists and is not a directory; give --output a new or existing folder");
  // Four files written one by one into a folder: its owner must be trusted (issue 48).
  check_own_directory(output_dir, "the report's --output folder",
                      "choose an --output folder you own (one that does not exist yet is created for you)");
  for (const char* f : kFiles) output_target((fs::path(output_dir) / f).string());
}

void write_report(const Report& rep) {
  namespace fs = std::filesystem;
  const fs::path dir(rep.options.output_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    fail("cannot create --output directory '", dir.string(), "': ", ec ? ec.message() : "not a directory");
  check_report_output(dir.string());  // all four before any: never a mix of new and old files
  write_file_atomic((dir / "report.md").string(), render_markdown(rep));
  write_file_atomic((dir / "report.html").string(), render_html(rep));
  write_file_atomic((dir / "scaling.csv").string(), render_csv(rep));
  write_file_atomic((dir / "report.json").string(), render_json_text(rep));
}

}  // namespace cnnscale::report
