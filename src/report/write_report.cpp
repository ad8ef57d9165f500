// write_report.cpp — write_report(): the four output files into --output DIR.
#include <filesystem>

#include "report/renderers.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"

namespace cnnscale::report {

void write_report(const Report& rep) {
  namespace fs = std::filesystem;
  const fs::path dir(rep.options.output_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    fail("cannot create --output directory '", dir.string(), "': ", ec ? ec.message() : "not a directory");
  write_file_atomic((dir / "report.md").string(), render_markdown(rep));
  write_file_atomic((dir / "report.html").string(), render_html(rep));
  write_file_atomic((dir / "scaling.csv").string(), render_csv(rep));
  write_file_atomic((dir / "report.json").string(), render_json(rep).dump(2) + "\n");
}

}  // namespace cnnscale::report
