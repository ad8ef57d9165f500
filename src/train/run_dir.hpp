// run_dir.hpp — a run directory (--run-dir) belongs to one run of one configuration:
// an advisory lock so that one training writes it at a time, the run's identity (its
// canonical configuration, recorded in checkpoints and run.json and compared on
// resume), finished runs (not rewritten), and moving an old run aside (--force-new).
//
// Why: checkpoints, run.json and metrics.jsonl of two trainings in one directory used
// to overwrite each other (both exited 0); `--resume auto` continued a run of another
// configuration without a word; re-running a finished run rewrote its run.json with
// 0 trained steps (images_per_s 0), which `cnnscale report` then rejected. The rules,
// for users, are in docs/checkpoints.md ("Run directory rules").
//
// Lock: rank 0 holds flock(LOCK_EX) on RUN_DIR/run.lock for the life of the RunDir
// (the kernel drops it on any exit, kill -9 included) and writes its holder (host,
// pid, job id, start time) into the file so that a second training can name it.
// flock works on local file systems, NFSv4 (as a POSIX lock) and Lustre mounted with
// -o flock; where the file system has no locks, a warning says the directory is not
// protected and the run goes on.
//
// Identity: RunConfig, "key=value" lines of the options that change the trajectory
// and are the same on any world size: model spec, data fingerprint (content, not
// path), seed, precision, optimiser, learning-rate schedule, drop-last. The global
// batch, the world size and the run length (--epochs, --max-steps) are not part of
// it: they may change on resume. Keys recorded on only one side are not compared
// (checkpoints older than the config record carry only model, optimizer and seed).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "comm/control_comm.hpp"
#include "data/batch_source.hpp"
#include "data/dataset.hpp"
#include "train/train_options.hpp"

namespace cnnscale {

// ---- identity ----

class RunConfig {
 public:
  void set(const std::string& key, const std::string& value);
  const std::string* get(const std::string& key) const;  // null when absent
  const std::vector<std::pair<std::string, std::string>>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

  std::string text() const;    // "key=value\n" per entry, in insertion order
  std::string digest() const;  // digest_of(text()), 16 hex digits
  nlohmann::json to_json() const;  // {"key": "value", ...}
  static RunConfig parse(const std::string& text);      // inverse of text()
  static RunConfig from_json(const nlohmann::json& j);  // inverse of to_json(); {} for non-objects

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

// The data a run trains on, by content: a prep data set by sample shape, classes,
// sample counts and a digest of its labels (in order) and normalisation statistics,
// so a copy elsewhere matches and another data set (or another order) does not.
std::string dataset_fingerprint(const DatasetInfo& info);
std::string synthetic_fingerprint(int64_t samples, const SampleShape& shape, int classes);

// The run's identity (see the header comment).
RunConfig make_run_config(const TrainOptions& o, const std::string& model_spec, const std::string& data_fingerprint);

// The keys present on both sides whose values differ, as one clause each:
// "seed was 11, configured seed is 12". Empty when they agree.
std::vector<std::string> config_differences(const RunConfig& recorded, const RunConfig& configured);

struct CheckpointMeta;
// Rank 0, --resume PATH: a warning naming the differences when the checkpoint was
// written by another configuration (loading it is then deliberate, e.g. fine-tuning).
void warn_if_other_config(const std::string& path, const CheckpointMeta& meta, const RunConfig& configured);

// ---- lock ----

struct LockHolder {
  std::string host, job_id, started;  // started: UTC, ISO 8601
  long pid = 0;
  std::string to_json_text() const;
  static LockHolder parse(const std::string& text);  // fields left empty when unreadable
  std::string describe() const;  // "pid 123 on node1 (Slurm job 45), since 2026-11-23T15:30:00Z"
};

// Rank 0, before anything is written there (RunDirLock::acquire calls it; issue 48): a
// run directory must be one its caller can trust with what a training writes into it,
// else UserError naming the directory (or the entry), the owner and the fix (choose a
// --run-dir you own):
//  - it belongs to the caller or to root (util/atomic_file.hpp check_own_directory): the
//    owner of a directory can rename, replace or link any name in it at any moment;
//  - the symbolic links on its path pass the output-file rule (resolve_links: none
//    planted by another user in a sticky folder anyone can write, such as /tmp);
//  - no symbolic link at a name a training writes — run.lock, run.json, metrics.jsonl,
//    checkpoints, tb, checkpoints/latest, checkpoints/step-*.h5 — and no entry there of
//    another user (root's are fine): cnnscale writes its run files into the directory
//    itself, never through links;
//  - run.lock and metrics.jsonl, written in place, have no other hard link.
// run.lock and metrics.jsonl are also opened with O_NOFOLLOW, so a link put there after
// this check is not followed either.
void check_run_directory(const std::string& dir);

// Holds RUN_DIR/run.lock (created with the directory) until destroyed. Move-only.
class RunDirLock {
 public:
  RunDirLock() = default;
  // Throws UserError naming the holder when another process holds the lock, when
  // the directory or the lock file cannot be created, and when check_run_directory
  // refuses the directory. On a file system without
  // locks, *unsupported (when given) says why and an unlocked handle is returned.
  static RunDirLock acquire(const std::string& dir, const LockHolder& me, std::string* unsupported = nullptr);
  ~RunDirLock();
  RunDirLock(RunDirLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  RunDirLock& operator=(RunDirLock&& o) noexcept;
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;
  bool locked() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

constexpr const char* kRunLockFile = "run.lock";

// ---- contents, starting, moving aside ----

// What `cnnscale train` writes into a run directory; --force-new moves these aside.
const std::vector<std::string>& run_outputs();  // checkpoints, run.json, metrics.jsonl, tb (TensorBoard)

struct RunDirContents {
  std::vector<std::string> present;  // entries of run_outputs() that exist
  bool has_checkpoints = false;      // checkpoints/step-*.h5
  bool empty() const { return present.empty(); }
};
RunDirContents inspect_run_dir(const std::string& dir);

// What a start with --resume MODE [--force-new] does in a directory holding `c`:
// "" to go on (move_aside set when the old run must first be moved), else the error.
struct StartPlan {
  bool move_aside = false;
  std::string error;
};
StartPlan plan_start(const std::string& dir, const RunDirContents& c, const std::string& resume, bool force_new);

// Moves the present run_outputs() into dir/previous-<UTC time>[-N]/ and returns that
// path. Renames only (same file system); throws UserError naming what failed.
std::string move_run_aside(const std::string& dir, const std::string& utc_stamp);

std::string utc_now_iso8601();  // 2026-11-23T15:30:00Z
std::string utc_now_stamp();    // 20261123T153000Z (for file names)

// Whether a run has anything to train, from the resume point (resumed, at
// resumed_step), the steps run.json records (-1: no run.json), --resume and the steps
// this command asks for: train; done (the resume point is at or past them); done
// without checkpoints (run.json alone, long enough); or cannot_continue (run.json
// alone, shorter, nothing to continue from).
enum class RunProgress { train, done, done_without_checkpoints, cannot_continue };
RunProgress run_progress(bool resumed, int64_t resumed_step, int64_t recorded_steps, const std::string& resume,
                         int64_t total_steps);

// ---- run.json across segments ----

// A run continued (resumed) keeps one run.json for the whole run: position and
// outcome fields (steps, epochs, train_loss, test_accuracy, accuracy_per_epoch) cover
// the whole run, performance fields (images_per_s, step_ms, breakdown, wall_s, world
// size …) the last segment, and `segments` lists every completed segment. Given the
// previous run.json (null when none) and this segment's summary, returns the merged
// summary: earlier accuracy_per_epoch entries and segments up to first_step are kept.
nlohmann::json merge_run_summary(const nlohmann::json& previous, nlohmann::json now, int64_t first_step);

// ---- the collective front end used by the trainer ----

// Collective (every rank constructs it, with the same options) over the control plane.
// With an empty --run-dir it does nothing. Rank 0 takes the lock, then applies
// plan_start (moving an old run aside on --force-new) and reads what the directory
// records (run.json); a refusal is thrown on every rank as CollectiveError (exit 2,
// one message). `control` must outlive the RunDir.
class RunDir {
 public:
  RunDir(const TrainOptions& o, ControlComm& control, const std::string& host, const std::string& job_id);
  bool enabled() const { return !dir_.empty(); }
  const std::string& path() const { return dir_; }

  // Collective. Compares `configured` with the identity the directory records (its
  // newest readable checkpoint, else run.json): a difference is an error naming the
  // differing keys and how to start afresh. Also for --resume PATH (the new run
  // would write into this directory).
  void check_identity(const RunConfig& configured) const;

  // Collective, after resuming. True when there is nothing to train: the resume point
  // (or, without checkpoints, run.json's steps) is at or past total_steps. Rank 0 says
  // so; run.json and metrics.jsonl are left untouched. Throws when the directory holds
  // a shorter finished run but no checkpoint to continue it from.
  bool finished(bool resumed, int64_t resumed_step, int64_t total_steps) const;

  // Rank 0: the metrics.jsonl record that opens a segment (see docs/checkpoints.md).
  nlohmann::json start_record(int64_t first_step, int world, int64_t global_batch, const std::string& resumed_from,
                              const std::string& digest) const;

  // Rank 0: merge_run_summary with the run.json read at start.
  nlohmann::json summarize(nlohmann::json now, int64_t first_step) const;
  // Rank 0: the run.json read at start records a finished run (train/run_end.hpp: a
  // stopped continuation of it must not replace that summary).
  bool previous_finished() const;

 private:
  std::string dir_, resume_;
  ControlComm& control_;
  int rank_ = 0;
  RunDirLock lock_;
  nlohmann::json previous_;   // rank 0: run.json as found (null when none)
  int64_t recorded_steps_ = -1;  // a finished run.json's steps on every rank, -1 without one
};

}  // namespace cnnscale
