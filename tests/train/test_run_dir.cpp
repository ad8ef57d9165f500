// test_run_dir.cpp — the run-directory rules without MPI: the run's identity (what is
// in it, what is not, naming differences), the lock (a second holder is refused and
// named; a killed holder releases it), --resume none / --force-new plans, moving an
// old run aside, run.json across segments, and checkpoint pruning by step. Issue 48, as
// root: a run directory of another user (uid 65534), one reached through another user's
// link in a sticky folder, or one holding links (or another user's files) at the names a
// training writes is refused before anything is written; run.lock and metrics.jsonl are
// never opened through a link.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "nn/model.hpp"
#include "train/checkpoint.hpp"
#include "train/optimizer.hpp"
#include "train/run_dir.hpp"
#include "train/run_end.hpp"
#include "train/run_files.hpp"
#include "util/error.hpp"

namespace fs = std::filesystem;
using namespace cnnscale;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/cnnscale-run-dir-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

void touch(const std::string& path, const std::string& content = "x") {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << content;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

RunConfig config_of(const TrainOptions& o) { return make_run_config(o, "conv(8,3) relu flatten linear(10)", "data A"); }

}  // namespace

TEST(RunConfig, TextAndJsonRoundTrip) {
  TrainOptions o;
  o.lr.lr = 0.05;
  const RunConfig c = config_of(o);
  EXPECT_EQ(*c.get("lr"), "0.05");  // shortest exact text, not 0.050000
  EXPECT_EQ(RunConfig::parse(c.text()).text(), c.text());
  const RunConfig back = RunConfig::from_json(c.to_json());  // run.json's object: compared by key
  EXPECT_EQ(back.entries().size(), c.entries().size());
  EXPECT_TRUE(config_differences(back, c).empty());
  EXPECT_TRUE(config_differences(c, back).empty());
  EXPECT_EQ(c.digest().size(), 16u);
}

TEST(RunConfig, WorldSizeAndLengthAreNotPartOfTheIdentity) {
  TrainOptions a;
  TrainOptions b = a;
  b.batch_size = 7;  // per rank: the global batch may change on resume
  b.epochs = 9;
  b.max_steps = 123;
  b.threads = 4;
  b.backend = Backend::mpi;
  b.checkpoint_every = 5;
  b.keep_checkpoints = 1;
  b.log_every = 3;
  EXPECT_EQ(config_of(a).digest(), config_of(b).digest());
}

TEST(RunConfig, TrajectoryOptionsAreNamedWhenTheyDiffer) {
  TrainOptions a;
  TrainOptions b = a;
  b.seed = 12;
  b.lr.lr = 0.1;
  const RunConfig ca = config_of(a), cb = config_of(b);
  EXPECT_NE(ca.digest(), cb.digest());
  const auto diff = config_differences(ca, cb);
  ASSERT_EQ(diff.size(), 2u);
  EXPECT_EQ(diff[0], "seed was '42', configured seed is '12'");
  EXPECT_EQ(diff[1], "lr was '0.01', configured lr is '0.1'");
  // Another model or data set.
  const RunConfig cm = make_run_config(a, "conv(4,3) relu flatten linear(10)", "data B");
  const auto d2 = config_differences(ca, cm);
  ASSERT_EQ(d2.size(), 2u);
  EXPECT_NE(d2[0].find("configured model is 'conv(4,3)"), std::string::npos);
  EXPECT_NE(d2[1].find("configured data is 'data B'"), std::string::npos);
  EXPECT_TRUE(config_differences(ca, config_of(a)).empty());
}

TEST(RunConfig, KeysRecordedOnOneSideOnlyAreNotCompared) {
  RunConfig legacy;  // what a checkpoint from before the config record says
  legacy.set("model", "conv(8,3) relu flatten linear(10)");
  legacy.set("seed", "42");
  TrainOptions o;
  EXPECT_TRUE(config_differences(legacy, config_of(o)).empty());
  o.seed = 1;
  EXPECT_EQ(config_differences(legacy, config_of(o)).size(), 1u);
}

TEST(RunConfig, DataFingerprintIsContentNotPath) {
  DatasetInfo a;
  a.dir = "/scratch/a";
  a.shape = {1, 28, 28};
  a.classes = 3;
  a.mean = {0.25};
  a.std = {0.5};
  a.train.name = "train";
  a.train.samples = 4;
  a.train.labels = {0, 1, 2, 1};
  a.test.name = "test";
  a.test.samples = 1;
  a.test.labels = {2};
  DatasetInfo copy = a;
  copy.dir = "/home/u/copy-of-a";
  EXPECT_EQ(dataset_fingerprint(a), dataset_fingerprint(copy));
  EXPECT_NE(dataset_fingerprint(a).find("1x28x28, 3 classes, 4 train + 1 test samples"), std::string::npos);
  DatasetInfo reordered = a;
  reordered.train.labels = {1, 0, 2, 1};
  EXPECT_NE(dataset_fingerprint(a), dataset_fingerprint(reordered));
  DatasetInfo other_stats = a;
  other_stats.mean = {0.2500001};
  EXPECT_NE(dataset_fingerprint(a), dataset_fingerprint(other_stats));
  EXPECT_NE(synthetic_fingerprint(60000, {1, 28, 28}, 10), synthetic_fingerprint(600, {1, 28, 28}, 10));
}

TEST(RunDirLock, SecondHolderIsRefusedAndToldWhoHoldsIt) {
  TempDir t;
  const std::string dir = t.path + "/run";  // created by acquire
  LockHolder me;
  me.host = "node7";
  me.pid = 4242;
  me.job_id = "991";
  me.started = "2026-11-23T15:30:00Z";
  {
    RunDirLock first = RunDirLock::acquire(dir, me);
    ASSERT_TRUE(first.locked());
    // flock belongs to the open file: a second open in this process conflicts like another process would.
    try {
      RunDirLock second = RunDirLock::acquire(dir, LockHolder{});
      FAIL() << "a second lock on a held run directory was granted";
    } catch (const UserError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("is in use by another training: pid 4242 on node7 (Slurm job 991), since 2026-11-23T15:30:00Z"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("choose another --run-dir"), std::string::npos) << m;
    }
  }
  // Released with its holder.
  RunDirLock again = RunDirLock::acquire(dir, me);
  EXPECT_TRUE(again.locked());
}

TEST(RunDirLock, KilledHolderReleasesTheLock) {
  TempDir t;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    LockHolder me;
    me.pid = getpid();
    me.host = "child";
    RunDirLock l = RunDirLock::acquire(t.path, me);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  try {
    RunDirLock l = RunDirLock::acquire(t.path, LockHolder{});
    ADD_FAILURE() << "the child's lock was not honoured";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("pid " + std::to_string(child) + " on child"), std::string::npos) << e.what();
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  RunDirLock l = RunDirLock::acquire(t.path, LockHolder{});
  EXPECT_TRUE(l.locked());
}

TEST(RunDirStart, ResumeNoneAndForceNew) {
  TempDir t;
  const std::string d = t.path;
  EXPECT_TRUE(inspect_run_dir(d).empty());
  EXPECT_EQ(plan_start(d, inspect_run_dir(d), "none", false).error, "");  // empty: fine
  touch(d + "/" + kRunLockFile);                                          // the lock is no result
  EXPECT_TRUE(inspect_run_dir(d).empty());
  touch(d + "/checkpoints/step-00000004.h5");
  touch(d + "/metrics.jsonl");
  const RunDirContents c = inspect_run_dir(d);
  EXPECT_TRUE(c.has_checkpoints);
  EXPECT_EQ(c.present, (std::vector<std::string>{"checkpoints", "metrics.jsonl"}));
  const StartPlan refused = plan_start(d, c, "none", false);
  EXPECT_NE(refused.error.find("already holds a run (checkpoints, metrics.jsonl)"), std::string::npos) << refused.error;
  EXPECT_NE(refused.error.find("--resume none --force-new"), std::string::npos);
  EXPECT_NE(refused.error.find("a new --run-dir"), std::string::npos);
  EXPECT_NE(refused.error.find("--resume auto"), std::string::npos);
  const StartPlan forced = plan_start(d, c, "none", true);
  EXPECT_EQ(forced.error, "");
  EXPECT_TRUE(forced.move_aside);
  EXPECT_FALSE(plan_start(d, c, "auto", false).move_aside);
  EXPECT_EQ(plan_start(d, c, "auto", false).error, "");
  EXPECT_NE(plan_start(d, c, "auto", true).error.find("use it with --resume none"), std::string::npos);
}

TEST(RunDirStart, MoveAsideKeepsEverythingAndNeverReusesAName) {
  TempDir t;
  const std::string d = t.path;
  touch(d + "/checkpoints/step-00000004.h5", "ckpt");
  touch(d + "/checkpoints/latest", "step-00000004.h5\n");
  touch(d + "/run.json", "{\"steps\": 4}");
  touch(d + "/metrics.jsonl", "{}\n");
  touch(d + "/notes.txt", "mine");  // not ours: stays
  const std::string first = move_run_aside(d, "20261123T153000Z");
  EXPECT_EQ(first, d + "/previous-20261123T153000Z");
  EXPECT_EQ(slurp(first + "/checkpoints/step-00000004.h5"), "ckpt");
  EXPECT_EQ(slurp(first + "/checkpoints/latest"), "step-00000004.h5\n");
  EXPECT_EQ(slurp(first + "/run.json"), "{\"steps\": 4}");
  EXPECT_EQ(slurp(first + "/metrics.jsonl"), "{}\n");
  EXPECT_TRUE(inspect_run_dir(d).empty());
  EXPECT_EQ(slurp(d + "/notes.txt"), "mine");
  touch(d + "/run.json", "second");
  const std::string second = move_run_aside(d, "20261123T153000Z");  // same second
  EXPECT_EQ(second, d + "/previous-20261123T153000Z-2");
  EXPECT_EQ(slurp(second + "/run.json"), "second");
  EXPECT_EQ(slurp(first + "/run.json"), "{\"steps\": 4}");
}

TEST(RunProgress, FinishedRunsAreNotRetrained) {
  // Resumed: done when the resume point is at or past the steps asked for.
  EXPECT_EQ(run_progress(true, 4, 4, "auto", 4), RunProgress::done);        // the same command again
  EXPECT_EQ(run_progress(true, 150, 100, "auto", 100), RunProgress::done);  // a longer continuation exists
  EXPECT_EQ(run_progress(true, 4, 4, "auto", 7), RunProgress::train);       // more steps: continue
  EXPECT_EQ(run_progress(true, 8, 12, "auto", 12), RunProgress::train);     // newest damaged, resumed earlier
  EXPECT_EQ(run_progress(true, 12, -1, "other/step-12.h5", 12), RunProgress::done);  // --resume PATH
  // Not resumed: only run.json can say the run is done.
  EXPECT_EQ(run_progress(false, 0, -1, "auto", 4), RunProgress::train);  // a new run
  EXPECT_EQ(run_progress(false, 0, -1, "none", 4), RunProgress::train);
  EXPECT_EQ(run_progress(false, 0, 4, "auto", 4), RunProgress::done_without_checkpoints);
  EXPECT_EQ(run_progress(false, 0, 4, "auto", 7), RunProgress::cannot_continue);
}

TEST(RunSummary, ContinuedRunCoversTheWholeRun) {
  using json = nlohmann::json;
  json previous = {{"steps", 100},
                   {"world_size", 2},
                   {"global_batch", 64},
                   {"images_per_s", 900.0},
                   {"wall_s", 10.0},
                   {"test_accuracy", 0.8},
                   {"accuracy_per_epoch", json::array({{{"epoch", 1}, {"step", 100}, {"accuracy", 0.8}}})}};
  json now = {{"steps", 200},
              {"world_size", 4},
              {"global_batch", 64},
              {"images_per_s", 1700.0},
              {"wall_s", 6.0},
              {"test_accuracy", nullptr},
              {"resumed_from", "r/checkpoints/step-00000100.h5"},
              {"accuracy_per_epoch", json::array()}};
  const json m = merge_run_summary(previous, now, 100);
  EXPECT_EQ(m["steps"], 200);
  EXPECT_EQ(m["first_step"], 100);
  ASSERT_EQ(m["segments"].size(), 2u);
  EXPECT_EQ(m["segments"][0]["last_step"], 100);  // from a run.json without segments
  EXPECT_EQ(m["segments"][0]["world_size"], 2);
  EXPECT_EQ(m["segments"][1]["first_step"], 100);
  EXPECT_EQ(m["segments"][1]["world_size"], 4);
  EXPECT_EQ(m["accuracy_per_epoch"].size(), 1u);
  EXPECT_DOUBLE_EQ(m["test_accuracy"].get<double>(), 0.8);  // the run's latest evaluation
  EXPECT_DOUBLE_EQ(m["images_per_s"].get<double>(), 1700.0);  // performance: this segment
  // A third segment keeps both earlier ones; a segment past the resume point (a rewind) is dropped.
  json third = now;
  third["steps"] = 300;
  const json m3 = merge_run_summary(m, third, 200);
  EXPECT_EQ(m3["segments"].size(), 3u);
  const json rewound = merge_run_summary(m, third, 150);
  EXPECT_EQ(rewound["segments"].size(), 2u);
  // A fresh run has one segment and no history.
  EXPECT_EQ(merge_run_summary(nullptr, now, 0)["segments"].size(), 1u);
}

// How a run ended (train/run_end.hpp): a stopped segment is no finished run, keeps its
// "ended" in the segments of the run that later finishes, and a record without timings
// leaves the segment's images_per_s null.
TEST(RunSummary, StoppedSegmentsAreNotFinishedRunsAndStayInTheHistory) {
  using json = nlohmann::json;
  EXPECT_TRUE(run_json_finished(json{{"steps", 10}}));  // run.json from before "ended"
  EXPECT_TRUE(run_json_finished(json{{"steps", 10}, {"ended", "finished"}}));
  EXPECT_FALSE(run_json_finished(json{{"steps", 10}, {"ended", "signal SIGTERM at step 10"}}));
  EXPECT_FALSE(run_json_finished(json(nullptr)));
  EXPECT_FALSE(run_json_finished(json::array()));
  const json stopped = merge_run_summary(
      nullptr, json{{"steps", 40}, {"world_size", 2}, {"ended", "rank 1 on n2 died or hung: ..."}}, 0);
  ASSERT_EQ(stopped["segments"].size(), 1u);
  EXPECT_EQ(stopped["segments"][0]["ended"], "rank 1 on n2 died or hung: ...");
  EXPECT_TRUE(stopped["segments"][0]["images_per_s"].is_null());  // no timings: killed
  // Resumed from its checkpoint at 40 and finished: both segments, the first with its end.
  const json done = merge_run_summary(stopped, json{{"steps", 100}, {"images_per_s", 5.0}, {"ended", "finished"}}, 40);
  ASSERT_EQ(done["segments"].size(), 2u);
  EXPECT_EQ(done["segments"][0]["ended"], "rank 1 on n2 died or hung: ...");
  EXPECT_FALSE(done["segments"][1].contains("ended"));
  // Resumed from an older checkpoint (30): the killed segment's steps past it are redone.
  EXPECT_EQ(merge_run_summary(stopped, json{{"steps", 100}}, 30)["segments"].size(), 1u);
}

namespace {
struct TinyRun {
  std::unique_ptr<Model> model = make_model("conv(2,3) relu flatten linear(3)", {1, 6, 6}, 3);
  std::unique_ptr<Optimizer> opt = make_optimizer(OptimizerOptions{}, model->params(), model->param_count());
  CheckpointMeta meta(int64_t step) {
    CheckpointMeta m;
    m.step = step;
    m.model = model->name();
    m.model_spec = model->spec();
    m.optimizer = opt->kind();
    m.config = "model=" + model->spec() + "\nseed=42\n";
    return m;
  }
};
}  // namespace

TEST(CheckpointPruning, KeepsNewestByStepAndNeverTheOneJustWritten) {
  TempDir t;
  TinyRun r;
  r.model->prepare(1, Precision::fp32);
  r.model->init_params(1);
  const std::string d = t.path + "/checkpoints";
  // Files of later steps (left by an older run, or before a resume from an older checkpoint).
  for (const char* n : {"step-00000020.h5", "step-00000030.h5", "step-00000040.h5"}) touch(d + "/" + n);
  write_checkpoint(d, *r.model, *r.opt, r.meta(5), 3);
  EXPECT_TRUE(fs::exists(d + "/step-00000005.h5"));
  EXPECT_EQ(slurp(d + "/latest"), "step-00000005.h5\n");
  EXPECT_TRUE(fs::exists(d + "/step-00000040.h5"));
  // Among steps up to the one written, the newest `keep` stay.
  write_checkpoint(d, *r.model, *r.opt, r.meta(6), 2);
  write_checkpoint(d, *r.model, *r.opt, r.meta(7), 2);
  EXPECT_FALSE(fs::exists(d + "/step-00000005.h5"));
  EXPECT_TRUE(fs::exists(d + "/step-00000006.h5"));
  EXPECT_TRUE(fs::exists(d + "/step-00000007.h5"));
  // Steps past 8 digits: by number, not by name.
  touch(d + "/step-99999999.h5");
  touch(d + "/step-100000000.h5");
  write_checkpoint(d, *r.model, *r.opt, r.meta(100000001), 2);
  EXPECT_TRUE(fs::exists(d + "/step-100000001.h5"));
  EXPECT_TRUE(fs::exists(d + "/step-100000000.h5"));
  EXPECT_FALSE(fs::exists(d + "/step-99999999.h5"));
  EXPECT_EQ(slurp(d + "/latest"), "step-100000001.h5\n");
  EXPECT_EQ(checkpoint_candidates(d).front(), d + "/step-100000001.h5");
  // The identity travels with the checkpoint.
  const CheckpointMeta back = read_checkpoint_meta(d + "/step-100000001.h5");
  EXPECT_EQ(back.step, 100000001);
  EXPECT_EQ(back.config, "model=" + r.model->spec() + "\nseed=42\n");
}

// --cudnn-benchmark off is part of the recorded configuration (only when off: runs from
// before the option, all of them "on" by the default, keep their digests).
TEST(RunConfig, CudnnBenchmarkOffIsRecorded) {
  TrainOptions a;
  TrainOptions b = a;
  b.model_options.cudnn_benchmark = false;
  EXPECT_EQ(config_of(a).get("cudnn_benchmark"), nullptr);
  ASSERT_NE(config_of(b).get("cudnn_benchmark"), nullptr);
  EXPECT_EQ(*config_of(b).get("cudnn_benchmark"), "false");
  EXPECT_NE(config_of(a).digest(), config_of(b).digest());
}

// The model's tuning (the GPU model's convolution algorithms) travels with the
// checkpoint as an optional attribute: absent (older checkpoints, the CPU model) reads
// as empty, a malformed one makes the checkpoint damaged.
TEST(CheckpointTuning, OptionalAttributeRoundTripsAndIsValidated) {
  TempDir t;
  TinyRun r;
  r.model->prepare(1, Precision::fp32);
  r.model->init_params(1);
  EXPECT_EQ(r.model->tuning(), "");  // the CPU model makes no choices
  r.model->set_tuning("fwd n=1 c=1 h=6 w=6 k=2 kernel=3 pad=0 stride=1 math=fma algo=1\n");  // ignored
  const std::string d = t.path + "/checkpoints";
  write_checkpoint(d, *r.model, *r.opt, r.meta(1), 5);
  EXPECT_EQ(read_checkpoint_meta(d + "/step-00000001.h5").tuning, "");
  CheckpointMeta m = r.meta(2);
  m.tuning = "# cuDNN 91900, NVIDIA H100, sm_90\nfwd n=1 c=1 h=6 w=6 k=2 kernel=3 pad=0 stride=1 math=fma algo=1\n";
  write_checkpoint(d, *r.model, *r.opt, m, 5);
  EXPECT_EQ(read_checkpoint_meta(d + "/step-00000002.h5").tuning, m.tuning);
  EXPECT_EQ(read_checkpoint(d + "/step-00000002.h5", *r.model, *r.opt).tuning, m.tuning);
  CheckpointMeta bad = r.meta(3);
  bad.tuning = "fwd n=1 algo=1\n";
  write_checkpoint(d, *r.model, *r.opt, bad, 5);
  try {
    read_checkpoint_meta(d + "/step-00000003.h5");
    FAIL() << "a malformed tuning attribute was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("step-00000003.h5' has a damaged 'tuning' attribute: convolution algorithm "
                                         "record, line 1 'fwd n=1 algo=1'"),
              std::string::npos)
        << e.what();
  }
}

// ---- issue 48: a run directory another user controls ----

namespace {

constexpr uid_t kNobody = 65534;

// Root's private file (0600, "secret") beside the run directories of a test.
struct Hostile {
  TempDir t;
  std::string priv = t.path + "/private.txt";
  Hostile() {
    std::ofstream(priv) << "secret";
    chmod(priv.c_str(), 0600);
  }
  void expect_private_untouched() const {
    EXPECT_EQ(slurp(priv), "secret");
    struct stat st {};
    ASSERT_EQ(stat(priv.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  }
  // `link` -> `to`, owned by uid 65534 (as nobody's `ln -s` makes it).
  static void strangers_link(const std::string& to, const std::string& link) {
    fs::create_symlink(to, link);
    ASSERT_EQ(lchown(link.c_str(), kNobody, kNobody), 0);
  }
};

std::string acquire_error(const std::string& dir) {
  try {
    RunDirLock l = RunDirLock::acquire(dir, LockHolder{});
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(RunDirTrust, AnotherUsersDirectoryIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (chown)";
  Hostile h;
  const std::string dir = h.t.path + "/run";  // `mkdir -m 777` by nobody
  ASSERT_EQ(mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  ASSERT_EQ(chown(dir.c_str(), kNobody, kNobody), 0);
  const std::string e = acquire_error(dir);
  EXPECT_NE(e.find("run directory (--run-dir) '" + dir + "' belongs to "), std::string::npos) << e;
  EXPECT_NE(e.find("uid 65534), not to you (you are root (uid 0))"), std::string::npos) << e;
  EXPECT_NE(e.find("choose a --run-dir you own"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir + "/run.lock"));
  // Root's own directory, mode 777 or not, is the caller's.
  ASSERT_EQ(chown(dir.c_str(), 0, 0), 0);
  EXPECT_EQ(acquire_error(dir), "");
}

TEST(RunDirTrust, LinksAtTheNamesATrainingWritesAreRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (lchown)";
  Hostile h;
  for (const std::string name : {"run.lock", "run.json", "metrics.jsonl", "checkpoints", "tb", "checkpoints/latest",
                                 "checkpoints/step-00000004.h5"}) {
    const std::string dir = h.t.path + "/run-" + std::to_string(std::hash<std::string>()(name));
    fs::create_directories(dir + "/checkpoints");
    if (name == "checkpoints") fs::remove(dir + "/checkpoints");
    Hostile::strangers_link(name == "checkpoints" ? h.t.path : h.priv, dir + "/" + name);
    const std::string e = acquire_error(dir);
    EXPECT_NE(e.find("run directory (--run-dir) '" + dir + "' holds a symbolic link '" + dir + "/" + name + "' (to '"),
              std::string::npos)
        << name << ": " << e;
    EXPECT_NE(e.find("remove the link (rm '" + dir + "/" + name + "'), or choose a --run-dir you own"),
              std::string::npos)
        << name << ": " << e;
    h.expect_private_untouched();
  }
  // The caller's own link is no better there: metrics.jsonl and run.lock are written in place.
  const std::string own = h.t.path + "/own";
  fs::create_directories(own);
  fs::create_symlink(h.priv, own + "/metrics.jsonl");
  EXPECT_NE(acquire_error(own).find("holds a symbolic link '" + own + "/metrics.jsonl'"), std::string::npos);
  h.expect_private_untouched();
}

TEST(RunDirTrust, AnotherUsersFilesAndHardLinksAreRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (chown)";
  Hostile h;
  const std::string dir = h.t.path + "/run";
  fs::create_directories(dir);
  touch(dir + "/run.json", "{}");
  ASSERT_EQ(chown((dir + "/run.json").c_str(), kNobody, kNobody), 0);
  const std::string e = acquire_error(dir);
  EXPECT_NE(e.find("holds '" + dir + "/run.json', which belongs to "), std::string::npos) << e;
  fs::remove(dir + "/run.json");
  fs::create_hard_link(h.priv, dir + "/run.lock");  // root's own file, a second name in the run directory
  const std::string l = acquire_error(dir);
  EXPECT_NE(l.find("holds '" + dir + "/run.lock', which has 1 other hard link(s)"), std::string::npos) << l;
  h.expect_private_untouched();
}

TEST(RunDirTrust, AStrangersLinkToTheRunDirectoryInASharedFolderIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (lchown)";
  Hostile h;
  const std::string shared = h.t.path + "/shared", real = h.t.path + "/root-run";
  fs::create_directories(shared);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);
  fs::create_directories(real);
  Hostile::strangers_link(real, shared + "/run");
  const std::string e = acquire_error(shared + "/run");
  EXPECT_NE(e.find("cannot use the run directory (--run-dir) '" + shared + "/run': it is a symbolic link owned by"),
            std::string::npos)
      << e;
  EXPECT_TRUE(fs::is_empty(real));
}

TEST(RunDirTrust, RunLockAndMetricsAreNeverOpenedThroughALink) {
  Hostile h;
  const std::string dir = h.t.path + "/run";
  fs::create_directories(dir);
  // Put there after RunDir's check (the race it cannot close): the open itself refuses.
  fs::create_symlink(h.priv, dir + "/metrics.jsonl");
  MetricsLog m;
  try {
    m.open(dir);
    m.append({{"step", 1}});
    ADD_FAILURE() << "metrics.jsonl was opened through a link";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '" + dir + "/metrics.jsonl': it is a symbolic link"),
              std::string::npos)
        << e.what();
  }
  h.expect_private_untouched();
}
