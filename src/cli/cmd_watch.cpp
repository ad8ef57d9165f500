// cmd_watch.cpp — `cnnscale watch RUN_DIR`: a running job's progress as a compact live
// table, from RUN_DIR/metrics.jsonl (report/watch.hpp); ends when run.json says the
// run ended, on Ctrl-C, or at once with --once.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "report/watch.hpp"
#include "util/error.hpp"

namespace cnnscale::cli {

int cmd_watch(int argc, char** argv) {
  CommandSpec spec{"watch", "cnnscale watch RUN_DIR [--interval S] [--once]",
                   "Shows a training run's progress as a compact table (step, epoch, loss, lr, images/s, step time,\n"
                   "the slowest rank's step time, elapsed), read from RUN_DIR/metrics.jsonl: the job may run on\n"
                   "other nodes, on a shared file system. On a terminal the table is redrawn in place every\n"
                   "--interval seconds; otherwise new rows are printed as they come. Ends when RUN_DIR/run.json\n"
                   "says the run finished (exit status 0); when run.json or metrics.jsonl says it stopped early\n"
                   "(a signal, an error, a rank that died: status 1, with how it ended); when no process holds\n"
                   "RUN_DIR/run.lock any more (or another process than the training it names) and nothing\n"
                   "records an end: the run was killed (status 1); or on Ctrl-C. A run.json it cannot read and\n"
                   "metrics.jsonl lines that are no record are named (which field, which line), never dropped.\n"
                   "docs/watching.md.",
                   "Examples:\n"
                   "  cnnscale watch runs/resnet50-n4\n"
                   "  cnnscale watch runs/resnet50-n4 --once        (print the table now and exit)"};
  po::options_description desc("Options");
  desc.add_options()("run-dir", po::value<std::vector<std::string>>(), "the run directory (positional)")(
      "interval", po::value<double>()->default_value(5.0, "5"), "seconds between refreshes")(
      "rows", po::value<int>()->default_value(15), "progress rows shown")("once", po::bool_switch(),
                                                                          "print the current table and exit");
  auto parsed = parse_options(spec, argc, argv, desc, {{"run-dir", 1}});
  if (parsed.help) {
    print_help(spec, desc);
    return 0;
  }
  const auto& vm = parsed.vm;
  if (!vm.count("run-dir")) fail("watch: no run directory given; usage: ", spec.usage);
  std::string dir = vm["run-dir"].as<std::vector<std::string>>().front();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const double interval = vm["interval"].as<double>();
  if (!(interval > 0)) fail("watch: --interval must be positive (seconds), got ", interval);
  const int rows = vm["rows"].as<int>();
  if (rows < 1) fail("watch: --rows must be at least 1, got ", rows);
  const bool once = vm["once"].as<bool>();
  report::check_watch_dir(dir);

  const bool tty = isatty(STDOUT_FILENO) == 1 && !once;
  report::MetricsTail tail(dir + "/metrics.jsonl");
  report::WatchView view;
  view.run_dir = dir;
  view.max_rows = static_cast<size_t>(rows);
  int64_t printed_step = -1, printed_eval = -1;  // not a terminal: the last row and evaluation printed
  bool header_printed = false;
  bool lock_over = false;  // run.lock seen free (or held by another process than its recorded training) ...
  std::chrono::steady_clock::time_point free_since;  // ... since
  // Not a terminal: skipped metrics.jsonl lines are printed as they come, the first 10 of
  // them (then counted at the end), and a run.json problem once when it appears.
  constexpr int64_t kSkipsPrinted = 10;
  std::vector<std::string> new_skips;
  std::string printed_problem;
  for (;;) {
    new_skips.clear();
    const bool exists = tail.poll([&](report::MetricsLine&& l) {
      std::string why = l.error.empty() ? view.add(l.record) : l.error;
      if (why.empty()) return;
      view.skip(l.number, why);
      if (view.skipped <= kSkipsPrinted)
        new_skips.push_back("skipped " + dir + "/metrics.jsonl line " + std::to_string(l.number) + ": " + why +
                            (view.skipped == kSkipsPrinted ? " (further skipped lines are counted at the end)" : ""));
    });
    if (!exists)
      fail("watch: ", dir, "/metrics.jsonl disappeared (moved aside by --force-new?); watch the new run again");
    std::error_code ec;
    const auto mtime = std::filesystem::last_write_time(dir + "/metrics.jsonl", ec);
    view.seconds_since_update =
        ec ? -1 : std::chrono::duration<double>(std::filesystem::file_time_type::clock::now() - mtime).count();
    view.ended = report::run_ended(dir, view.start, &view.run_json, &view.run_json_problem, &view.run_json_shown_wrong);
    view.stopped.clear();
    if (view.ended) {
      const auto e = view.run_json.find("ended");
      if (e != view.run_json.end() && e->is_string() && *e != "finished") view.stopped = e->get<std::string>();
    } else if (view.end_line.is_object()) {
      // run.json kept a finished run's summary; this continuation's end is in metrics.jsonl.
      view.ended = true;
      view.run_json = nullptr;
      view.stopped = view.end_line.value("ended", std::string("stopped"));
    }
    // A killed run writes no run.json: its lock, released by the kernel, says so — or, when
    // another process holds it, the dead pid the lock file records (report::lock_squatter).
    // Twice, 2 s apart, so that a run starting (not yet holding its lock, or not yet
    // recorded in it) is not taken for one.
    if (!view.ended && !view.gone) {
      std::string who, squatter;
      const report::LockProbe lock = report::probe_run_lock(dir, &who);
      if (lock == report::LockProbe::held) squatter = report::lock_squatter(dir, who);
      if (lock == report::LockProbe::free || !squatter.empty()) {
        if (!lock_over) free_since = std::chrono::steady_clock::now();
        lock_over = true;
        if (once || std::chrono::steady_clock::now() - free_since >= std::chrono::seconds(2)) {
          view.gone = true;
          view.holder = who;
          view.squatter = squatter;
        }
      } else {
        lock_over = false;
      }
    }
    if (once || tty) {
      if (tty) std::fputs("\033[H\033[2J", stdout);  // home, clear
      std::fputs(report::render_watch(view).c_str(), stdout);
    } else {
      // A log file: the header once, then each new row, then the end.
      const std::string table = report::render_watch(view);
      if (!header_printed) {
        std::fputs(table.c_str(), stdout);
        header_printed = true;
        if (!view.rows.empty()) printed_step = view.rows.back().value("step", int64_t{0});
        if (!view.evals.empty()) printed_eval = view.evals.back().value("step", int64_t{0});
      } else {
        for (const auto& r : view.rows) {
          const int64_t s = r.value("step", int64_t{0});
          if (s <= printed_step) continue;
          std::fputs(report::watch_row(r).c_str(), stdout);
          printed_step = s;
        }
        for (const auto& e : view.evals) {
          const int64_t s = e.value("step", int64_t{0});
          if (s <= printed_eval) continue;
          std::fputs(report::watch_eval_line(e).c_str(), stdout);
          printed_eval = s;
        }
        for (const auto& line : new_skips) std::printf("%s\n", line.c_str());
        if (!view.run_json_problem.empty() && view.run_json_problem != printed_problem)
          std::printf("note: %s: watch cannot tell from it whether or how the run ended\n",
                      view.run_json_problem.c_str());
        if (view.ended || view.gone) {
          std::fputs(report::watch_state_line(view).c_str(), stdout);
          if (view.skipped > kSkipsPrinted || !view.run_json_shown_wrong.empty())
            std::fputs(report::watch_notes(view).c_str(), stdout);
        }
      }
      printed_problem = view.run_json_problem;
    }
    std::fflush(stdout);
    if (view.gone || !view.stopped.empty()) return 1;  // documented: the run ended without finishing
    if (once || view.ended) return 0;
    // Poll at least every second while the lock looks free, to confirm it soon.
    std::this_thread::sleep_for(std::chrono::duration<double>(lock_over ? std::min(interval, 1.0) : interval));
  }
}

}  // namespace cnnscale::cli
