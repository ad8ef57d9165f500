// fuzz_report.cpp — libFuzzer target: what `cnnscale report` and `cnnscale watch` read from run
// directories they did not write (a shared file system: another user's, a damaged or
// half-written one), through the product's own code (report/: load_run and analyze over
// run.json and metrics.jsonl, load_points over `--points` CSV, the four renderers; watch's
// MetricsTail, WatchView::add, run_ended, render_watch, read_metrics_end,
// describe_unfinished, lock_squatter over run.lock's text).
// Input: up to six parts separated by a line "%%": run A's run.json, its metrics.jsonl,
// run B's run.json, its metrics.jsonl, the --points CSV (none when empty), run A's run.lock
// (none when empty). The report runs over A and B with --allow-missing, --epochs 3,
// --train-samples 60000, --node-hour-cost 1.5, a 3-replicate bootstrap and --project 4,8x2.
// A UserError is the expected answer to a file report refuses; anything else escaping (an
// nlohmann::json exception: once a run.json's bytes that are not UTF-8 reached report.json's
// dump), a crash, a hang or a sanitizer report is a defect. watch never refuses a line: a
// record it cannot show is skipped and counted, and every line is one or the other.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "report/analysis.hpp"
#include "report/renderers.hpp"
#include "report/watch.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;
namespace rp = cnnscale::report;

namespace {

const std::string& dir() {
  // Never destroyed: RemoveAtExit (a global, made before it) uses it at exit.
  static const std::string& d = *new std::string([] {
    const std::string p = "/dev/shm/cnnscale-fuzz-report-" + std::to_string(getpid());
    fs::create_directories(p + "/a");
    fs::create_directories(p + "/b");
    return p;
  }());
  return d;
}

struct RemoveAtExit {
  ~RemoveAtExit() {
    std::error_code ec;
    fs::remove_all(dir(), ec);
  }
} remove_at_exit;

// Writes `text` to path, or removes path when `text` is empty and `absent_when_empty`.
void put(const std::string& path, std::string_view text, bool absent_when_empty) {
  if (text.empty() && absent_when_empty) {
    std::error_code ec;
    fs::remove(path, ec);
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) std::abort();
}

void watch(const std::string& run) {
  rp::WatchView view;
  view.run_dir = run;
  rp::MetricsTail tail(run + "/metrics.jsonl");
  int64_t lines = 0;
  tail.poll([&](rp::MetricsLine&& l) {
    ++lines;
    const std::string why = l.error.empty() ? view.add(l.record) : l.error;
    if (!why.empty()) view.skip(l.number, why);
  });
  if (view.skipped > lines) std::abort();
  view.ended = rp::run_ended(run, view.start, &view.run_json, &view.run_json_problem, &view.run_json_shown_wrong);
  std::string who;
  if (rp::probe_run_lock(run, &who) != rp::LockProbe::unknown) (void)rp::lock_squatter(run, who);
  (void)rp::render_watch(view);
  (void)rp::watch_state_line(view);
  (void)rp::watch_notes(view);
  for (const auto& r : view.rows) (void)rp::watch_row(r);
  for (const auto& e : view.evals) (void)rp::watch_eval_line(e);
  (void)rp::read_metrics_end(run);
  (void)rp::describe_unfinished(run);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return -1;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> part;
  for (size_t at = 0; part.size() < 5;) {
    const size_t sep = in.find("\n%%\n", at);
    if (sep == std::string_view::npos) {
      part.push_back(in.substr(at));
      break;
    }
    part.push_back(in.substr(at, sep - at));
    at = sep + 4;
    if (part.size() == 5) part.push_back(in.substr(at));
  }
  part.resize(6);
  const std::string d = dir(), a = d + "/a", b = d + "/b";
  put(a + "/run.json", part[0], true);
  put(a + "/metrics.jsonl", part[1], true);
  put(b + "/run.json", part[2], true);
  put(b + "/metrics.jsonl", part[3], true);
  put(d + "/points.csv", part[4], true);
  put(a + "/run.lock", part[5], true);
  watch(a);
  rp::ReportOptions o;
  o.run_dirs = {a, b};
  o.output_dir = d + "/out";  // not written: the renderers' text is what write_report writes
  o.allow_missing = true;
  o.bootstrap = 3;
  o.epochs = 3;
  o.train_samples = 60000;  // synthetic runs: the budget's data set size
  o.node_hour_cost = 1.5;
  o.project = "4,8x2";
  if (!part[4].empty()) o.points_file = d + "/points.csv";
  try {
    const rp::Report rep = rp::analyze(o);
    (void)rp::render_markdown(rep);
    (void)rp::render_html(rep);
    (void)rp::render_csv(rep);
    (void)rp::render_json_text(rep);  // what write_report writes
  } catch (const cnnscale::UserError& e) {
    if (std::getenv("CNNSCALE_FUZZ_PRINT")) std::fprintf(stderr, "refused: %s\n", e.what());
    return 0;
  }
  if (std::getenv("CNNSCALE_FUZZ_PRINT")) std::fprintf(stderr, "reported\n");
  return 0;
}
