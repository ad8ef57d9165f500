// watch.hpp — `cnnscale watch RUN_DIR`: a running job's metrics.jsonl (train/run_files.hpp)
// as a compact live table, read from the run directory only (a shared file system: the
// job may run on other nodes), never from the job's processes.
//
// MetricsTail reads the lines appended since its last poll (a line is only taken once it
// ends in '\n': the trainer writes whole lines, but a reader on NFS may see one in part);
// a file that shrank (moved aside by --force-new, a new run) is read again from its start.
// It reads at most 4 MiB at a time and hands each line on at once, so a long run's file
// never sits in memory whole; a line longer than 1 MiB is no record (skipped, said).
// The run has ended when run.json exists and records at least one step past the last
// segment's start (a resumed run keeps its previous run.json until it ends, docs/checkpoints.md).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cnnscale::report {

// One complete line of metrics.jsonl: its number (from 1) and the record, or why it is none.
struct MetricsLine {
  int64_t number = 0;
  nlohmann::json record;  // null when error is set
  std::string error;      // "not JSON (…)", "longer than 1 MiB"
};

class MetricsTail {
 public:
  explicit MetricsTail(std::string path) : path_(std::move(path)) {}
  // Calls `each` for every complete line appended since the last call. False when the
  // file does not exist.
  bool poll(const std::function<void(MetricsLine&&)>& each);
  int64_t bad_lines() const { return bad_; }

 private:
  void take(const char* data, size_t n, const std::function<void(MetricsLine&&)>& each);
  std::string path_, partial_;
  uint64_t offset_ = 0;
  int64_t line_ = 0, bad_ = 0;
  bool overlong_ = false;  // within a line already longer than the limit
};

// What the table shows: the segment's start, the last progress rows and evaluations.
struct WatchView {
  std::string run_dir;
  nlohmann::json start;              // the last {"event": "start"} record (null: none yet)
  std::deque<nlohmann::json> rows;   // progress lines (step, loss, ...), the newest last
  std::deque<nlohmann::json> evals;  // {"event": "eval"} records, the newest last
  size_t max_rows = 15;
  bool ended = false;                // run.json (or an end line) says the run ended; finished unless `stopped`
  std::string stopped;               // how it ended early (run.json / metrics.jsonl "ended"), "" when finished
  nlohmann::json end_line;           // the segment's {"event": "end"} line (null: none)
  nlohmann::json run_json;           // when ended
  double seconds_since_update = -1;  // metrics.jsonl's age (-1: unknown)
  // No process holds RUN_DIR/run.lock any more and run.json records no end (seen twice,
  // 2 s apart): the run was stopped or killed (issue 28 item 3). `holder` is the last
  // holder's description from the lock file.
  bool gone = false;
  std::string holder;
  // run.lock is held, but not by the training recorded in it: that pid no longer exists on
  // its host (issue 39: a lock taken by an unrelated process kept watch waiting forever).
  // Who holds it instead ("pid Q (sleep)", from /proc/locks; util/process.hpp lock_taken_by_other).
  std::string squatter;
  // RUN_DIR/run.json exists but cannot say how the run ended: which field is wrong, or
  // that it is no JSON (issue 39: such a finished run was reported as killed).
  std::string run_json_problem;
  std::string run_json_shown_wrong;  // a field only shown (wall_s, ...) of the wrong type: noted, shown as - or ?
  // metrics.jsonl lines not shown because they are no cnnscale record: how many, and the
  // first few as "line N: why" (issue 39: they were dropped without a word).
  int64_t skipped = 0;
  std::vector<std::string> skipped_first;

  // A metrics.jsonl record: "" when shown or used, else why it is not (then counted).
  std::string add(const nlohmann::json& record);
  // Counts line `number` as skipped for `why` (keeps the first 3 reasons).
  void skip(int64_t number, const std::string& why);
};

// Whether a training holds RUN_DIR/run.lock (train/run_dir.hpp: an flock for the run's
// life, released by the kernel when the process dies, whatever killed it). A shared
// lock taken and dropped at once: train retries its own for a second, so a watch that
// probes just then never refuses a starting run. *who: the lock file's text.
enum class LockProbe { held, free, unknown };  // unknown: no run.lock, or no lock support
LockProbe probe_run_lock(const std::string& run_dir, std::string* who);

// Reads RUN_DIR/run.json: true when it records the end of the segment that `start`
// opened (see above; a stopped or killed run's record, train/run_end.hpp, too); fills
// *summary with it. When run.json exists but cannot tell — not JSON (past 16 MiB
// included), not an object, or a field that decides it of the wrong type (steps,
// first_step: whole numbers; ended: text) — false, and *problem (when given) says which:
// `RUN/run.json: "steps" is "10" (text), not a whole number`. A field only shown of the
// wrong type (wall_s, images_per_s, test_accuracy: numbers; timeline: text) goes to
// *shown_wrong alike. Both are cleared otherwise.
bool run_ended(const std::string& run_dir, const nlohmann::json& start, nlohmann::json* summary,
               std::string* problem = nullptr, std::string* shown_wrong = nullptr);

// When run.lock (its text: lock_text) records as its holder a pid on this host that no
// longer exists, although the lock is held by a process /proc/locks names none of whose
// pids (in any pid namespace) is the recorded one: who holds it — "pid Q (NAME)" — else "".
// A holder that cannot be seen or read counts as the run (a training in another pid
// namespace); one recorded on another host cannot be checked from here
// (util/process.hpp lock_taken_by_other).
std::string lock_squatter(const std::string& run_dir, const std::string& lock_text);

// How far a run got by its metrics.jsonl alone (a killed rank 0 writes no run.json):
// the last progress line's step and time, and the last segment's end line when one was
// written ({"event": "end"}, train/run_end.hpp). Reads at most the file's last 1 MiB.
struct MetricsEnd {
  bool exists = false;
  int64_t last_step = -1;  // -1: no progress line
  std::string ended;       // the end line's "ended" ("" when none after the last start)
  int64_t start_step = 0;  // the last start line's from_step
};
MetricsEnd read_metrics_end(const std::string& run_dir);

// One line on why RUN_DIR has no usable run.json, for `cnnscale report` (issue 28 item 3):
// still running (run.lock held: who, at which step), killed (lock free: its last holder,
// the last step; or held by another process than the dead holder it records), or never
// started (no metrics.jsonl). "" when RUN_DIR has run.json.
std::string describe_unfinished(const std::string& run_dir);

// The table: a header (run dir, ranks, global batch, state, progress and ETA), one row
// per progress line (step, epoch, loss, lr, images/s, step ms, slowest rank's ms, elapsed),
// the evaluations, and at the end the summary when the run ended.
std::string render_watch(const WatchView& v);
// Parts of it, for a log (not a terminal): the state line ("running: ..." or
// "finished: ...") and one progress row, each ending in '\n'. watch_notes: "note: …"
// lines on a run.json that cannot be read and on skipped metrics.jsonl lines ("" none).
std::string watch_state_line(const WatchView& v);
std::string watch_row(const nlohmann::json& progress_line);
std::string watch_eval_line(const nlohmann::json& eval_record);
std::string watch_notes(const WatchView& v);

// Throws UserError ("watch: ...") when run_dir does not exist or is not a directory,
// or holds no metrics.jsonl (no run has started there).
void check_watch_dir(const std::string& run_dir);

}  // namespace cnnscale::report
