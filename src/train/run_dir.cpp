// run_dir.cpp — see run_dir.hpp.
#include "train/run_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "data/augment.hpp"
#include "train/checkpoint.hpp"
#include "train/run_end.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/process.hpp"
#include "util/json_bounded.hpp"
#include <iterator>

namespace fs = std::filesystem;

namespace cnnscale {
namespace {

// Shortest text that reads back as the same double (so 0.05 is "0.05", not "0.050000").
std::string num(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string shape_text(const SampleShape& s) { return s.text(); }  // a volume's CxDxHxW

// Rank 0 ran `what`; its error message (or "") reaches every rank, which then fail alike.
void agree_or_fail(ControlComm& control, const std::string& error, const char* what) {
  const std::string agreed = control.broadcast_string(error, 0, what);
  if (!agreed.empty()) fail_collective(control.rank(), agreed);
}

std::string utc_format(const char* format) {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), format, &tm);
  return buf;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string fresh_start_advice(const std::string& dir) {
  return "to keep both, choose a new --run-dir; to start over here, pass --resume none --force-new (the old run "
         "moves to " + dir + "/previous-<time>/, nothing is deleted)";
}

// The identity a checkpoint records: its config text, or for checkpoints written
// before the config was recorded, what its attributes say.
RunConfig checkpoint_config(const CheckpointMeta& m) {
  if (!m.config.empty()) return RunConfig::parse(m.config);
  RunConfig c;
  c.set("model", m.model_spec);
  c.set("seed", std::to_string(m.seed));
  c.set("optimizer", m.optimizer);
  return c;
}

// The identity run.json records (older run.json files: model spec, seed, optimizer).
RunConfig run_json_config(const nlohmann::json& j) {
  if (j.contains("config") && j["config"].is_object()) return RunConfig::from_json(j["config"]);
  RunConfig c;
  if (j.contains("model_spec") && j["model_spec"].is_string()) c.set("model", j["model_spec"].get<std::string>());
  if (j.contains("seed") && j["seed"].is_number_unsigned()) c.set("seed", std::to_string(j["seed"].get<uint64_t>()));
  if (j.contains("optimizer") && j["optimizer"].is_string()) c.set("optimizer", j["optimizer"].get<std::string>());
  return c;
}

}  // namespace

// ---- identity ----

void RunConfig::set(const std::string& key, const std::string& value) {
  for (auto& [k, v] : entries_)
    if (k == key) {
      v = value;
      return;
    }
  entries_.emplace_back(key, value);
}

const std::string* RunConfig::get(const std::string& key) const {
  for (const auto& [k, v] : entries_)
    if (k == key) return &v;
  return nullptr;
}

std::string RunConfig::text() const {
  std::string t;
  for (const auto& [k, v] : entries_) t += k + "=" + v + "\n";
  return t;
}

std::string RunConfig::digest() const { return digest_of(text()); }

nlohmann::json RunConfig::to_json() const {
  // A plain object (nlohmann sorts its keys): readers compare it key by key.
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : entries_) j[k] = v;
  return j;
}

RunConfig RunConfig::parse(const std::string& text) {
  RunConfig c;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    c.set(line.substr(0, eq), line.substr(eq + 1));
  }
  return c;
}

RunConfig RunConfig::from_json(const nlohmann::json& j) {
  RunConfig c;
  if (!j.is_object()) return c;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.value().is_string()) c.set(it.key(), it.value().get<std::string>());
  return c;
}

std::string dataset_fingerprint(const DatasetInfo& info) {
  std::string content;
  for (const auto* split : {&info.train, &info.test}) {
    content += split->name + ":";
    content.append(reinterpret_cast<const char*>(split->labels.data()), split->labels.size() * sizeof(int32_t));
    content.append(reinterpret_cast<const char*>(split->targets.data()), split->targets.size() * sizeof(float));
    // Label maps are not in memory: the shards' digests stand for them (they cover the maps'
    // chunk checksums).
    if (info.task == TaskKind::segmentation)
      for (const auto& sh : split->shards) content += " " + sh.digest;
  }
  for (double m : info.mean) content += "mean " + num(m);
  for (double s : info.std) content += "std " + num(s);
  // Science data sets (issue 50) say what they hold; a classification one of uint8 images
  // keeps the text (and the digest) it always had.
  const bool science = info.task != TaskKind::classification || info.dtype != SampleType::u8;
  if (science)
    content += std::string("dtype ") + sample_type_name(info.dtype) + " transform " + info.transform + " task " +
               task_name(info.task);
  const bool classes = info.task == TaskKind::classification || info.task == TaskKind::segmentation;
  const std::string what = classes ? std::to_string(info.classes) + " classes" + (info.task == TaskKind::segmentation
                                                                                      ? std::string(" (label maps)")
                                                                                      : std::string())
                                   : std::to_string(info.targets) + " targets";
  return "prep " + shape_text(info.shape) + (science ? std::string(" ") + sample_type_name(info.dtype) : "") + ", " +
         what + ", " +
         std::to_string(info.train.samples) + " train + " + std::to_string(info.test.samples) +
         " test samples, content " + digest_of(content);
}

std::string synthetic_fingerprint(int64_t samples, const SampleShape& shape, int classes) {
  return "synthetic " + shape_text(shape) + ", " + std::to_string(classes) + " classes, " + std::to_string(samples) +
         " samples";
}

RunConfig make_run_config(const TrainOptions& o, const std::string& model_spec, const std::string& data) {
  RunConfig c;
  c.set("model", model_spec);
  c.set("data", data);
  c.set("seed", std::to_string(o.seed));
  c.set("precision", precision_name(o.precision));
  // Only when set: runs without it keep their digests.
  if (o.model_options.zero_init_residual) c.set("zero_init_residual", "true");
  // --cudnn-benchmark off (the GPU model's heuristic convolution algorithms), only when
  // off: runs from before the option keep their digests.
  if (!o.model_options.cudnn_benchmark) c.set("cudnn_benchmark", "false");
  // --loss and its options, only when given: runs that leave the loss to the data set keep
  // their digests (the data set's task is part of "data").
  if (o.loss_given) c.set("loss", loss_name(o.task.loss));
  if (!o.task.class_weights.empty()) {
    std::string w;
    for (float x : o.task.class_weights) w += (w.empty() ? "" : ",") + num(x);
    c.set("class_weights", w);
  }
  if (o.task.ignore_index >= 0) c.set("ignore_index", std::to_string(o.task.ignore_index));
  c.set("drop_last", o.data.drop_last ? "true" : "false");
  c.set("sync_bn", o.sync_bn ? "true" : "false");
  std::string augment;  // canonical: the step names, comma-separated ("none" without steps)
  for (const auto& s : parse_augment(o.data.augment)) {
    if (!augment.empty()) augment += ",";
    augment += s.name;
  }
  c.set("augment", augment.empty() ? "none" : augment);
  c.set("optimizer", o.optimizer.kind);
  if (o.optimizer.kind == "adamw") {
    c.set("beta1", num(o.optimizer.beta1));
    c.set("beta2", num(o.optimizer.beta2));
  } else {
    c.set("momentum", num(o.optimizer.momentum));
    c.set("nesterov", o.optimizer.nesterov ? "true" : "false");
  }
  c.set("weight_decay", num(o.optimizer.weight_decay));
  c.set("lr", num(o.lr.lr));
  c.set("lr_scaling", o.lr.scaling);
  if (o.lr.scaling != "none") c.set("lr_reference_batch", std::to_string(o.lr.reference_batch));
  c.set("warmup_epochs", num(o.lr.warmup_epochs));
  c.set("lr_decay", o.lr.decay);
  if (o.lr.decay == "step") {
    c.set("lr_step_epochs", num(o.lr.step_epochs));
    c.set("lr_gamma", num(o.lr.gamma));
  }
  return c;
}

std::vector<std::string> config_differences(const RunConfig& recorded, const RunConfig& configured) {
  std::vector<std::string> out;
  for (const auto& [key, was] : recorded.entries()) {
    const std::string* now = configured.get(key);
    if (now && *now != was) out.push_back(key + " was '" + was + "', configured " + key + " is '" + *now + "'");
  }
  return out;
}

void warn_if_other_config(const std::string& path, const CheckpointMeta& meta, const RunConfig& configured) {
  const auto diff = config_differences(checkpoint_config(meta), configured);
  if (!diff.empty())
    log_warn("--resume " + path + " was written by another configuration: " + join(diff, "; ") +
             "; it continues from that checkpoint's parameters and position with this run's options");
}

// ---- lock ----

std::string LockHolder::to_json_text() const {
  return nlohmann::json{{"host", host}, {"pid", pid}, {"job_id", job_id}, {"started", started}}.dump() + "\n";
}

LockHolder LockHolder::parse(const std::string& text) {
  LockHolder h;
  try {
    const auto j = parse_json(text);
    h.host = j.value("host", std::string());
    h.pid = j.value("pid", 0L);
    h.job_id = j.value("job_id", std::string());
    h.started = j.value("started", std::string());
  } catch (const nlohmann::json::exception&) {
  }
  return h;
}

std::string LockHolder::describe() const {
  if (pid <= 0 && host.empty()) return "a process that has not yet recorded itself (it is starting now)";
  std::string s = "pid " + std::to_string(pid) + " on " + (host.empty() ? std::string("?") : host);
  if (!job_id.empty()) s += " (Slurm job " + job_id + ")";
  if (!started.empty()) s += ", since " + started;
  return s;
}

void check_run_directory(const std::string& dir) {
  resolve_links(dir, "cannot use the run directory (--run-dir)");
  check_own_directory(dir, "run directory (--run-dir)",
                      "choose a --run-dir you own (a path that does not exist yet is created for you)");
  const uid_t me = ::geteuid();
  // in_place: a file written where it is (not replaced by a rename), so a hard link matters.
  auto check_entry = [&](const std::string& path, bool in_place) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return;
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      const fs::path to = fs::read_symlink(path, ec);
      fail("run directory (--run-dir) '", dir, "' holds a symbolic link '", path, "'",
           ec ? std::string() : " (to '" + to.string() + "')", ", made by ", describe_uid(st.st_uid),
           ": a training writes its files into the run directory itself, never through links (a link there could "
           "send run.json, metrics.jsonl, run.lock or checkpoints onto other files); remove the link (rm '",
           path, "'), or choose a --run-dir you own that holds none");
    }
    if (st.st_uid != me && st.st_uid != 0)
      fail("run directory (--run-dir) '", dir, "' holds '", path, "', which belongs to ", describe_uid(st.st_uid),
           ", not to you (you are ", describe_uid(me),
           "): a training would write or replace it; choose a --run-dir you own, or remove it if it is not needed");
    if (in_place && S_ISREG(st.st_mode) && st.st_nlink > 1)
      fail("run directory (--run-dir) '", dir, "' holds '", path, "', which has ", st.st_nlink - 1,
           " other hard link(s): a training writes it in place, so every name of it would change; remove it (rm '",
           path, "') or choose another --run-dir");
  };
  check_entry(dir + "/" + kRunLockFile, true);
  check_entry(dir + "/metrics.jsonl", true);
  for (const char* name : {"run.json", "checkpoints", "tb"}) check_entry(dir + "/" + name, false);
  struct stat st {};
  const std::string ckpt = dir + "/checkpoints";
  if (::lstat(ckpt.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(ckpt, ec)) {
      const std::string n = e.path().filename().string();
      const bool step_file = n.rfind("step-", 0) == 0 && n.size() > 8 && n.substr(n.size() - 3) == ".h5";
      if (n == "latest" || step_file) check_entry(e.path().string(), false);
    }
  }
}

RunDirLock RunDirLock::acquire(const std::string& dir, const LockHolder& me, std::string* unsupported) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create run directory (--run-dir) '", dir, "': ", ec.message(), "; choose a writable location");
  check_run_directory(dir);
  const std::string path = dir + "/" + kRunLockFile;
  // O_NOFOLLOW: a link put there after the check is not followed (issue 48).
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    fail("cannot open the run directory's lock file '", path, "': ",
         errno == ELOOP ? std::string("it is a symbolic link, which cnnscale does not follow there; remove it")
                        : std::string(std::strerror(errno)),
         "; choose a writable --run-dir");
  RunDirLock lock;
  // `cnnscale watch` takes a shared lock for an instant to see whether a run still holds
  // it (report/watch.hpp): a second of retries keeps that from refusing a starting run.
  int rc = -1, err = 0;
  for (int i = 0; i < 20; ++i) {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
    err = errno;
    if (rc == 0 || err != EWOULDBLOCK) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (rc != 0) {
    if (err == EWOULDBLOCK) {
      std::string text(4096, '\0');  // from the file opened (not the path again)
      const ssize_t got = ::pread(fd, text.data(), text.size(), 0);
      text.resize(got > 0 ? static_cast<size_t>(got) : 0);
      ::close(fd);
      const LockHolder holder = LockHolder::parse(text);
      // The lock outlived the training it records (issue 39); util/process.hpp tells a
      // training in its own pid namespace, which records the pid it has there, from that.
      if (const std::string who = lock_taken_by_other(path, holder.host, holder.pid); !who.empty()) {
        fail("run directory '", dir, "' is locked by ", who, ", not by a training: ", path, " records ",
             holder.describe(),
             ", which no longer runs. End that process (or choose another --run-dir); then this training can take "
             "the lock");
      }
      fail("run directory '", dir, "' is in use by another training: ", holder.describe(), " holds ", path,
           ". One training writes a run directory at a time; wait for that one to end, or ",
           "choose another --run-dir");
    }
    ::close(fd);
    if (unsupported)
      *unsupported = "the file system of '" + dir + "' does not support locks (flock: " + std::strerror(err) +
                     "), so nothing stops a second training from writing this run directory at the same time";
    return lock;
  }
  lock.fd_ = fd;
  const std::string text = me.to_json_text();
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    // The lock is held; only the holder's description is missing. Not worth failing for.
  }
  return lock;
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

RunDirLock& RunDirLock::operator=(RunDirLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

// ---- contents, starting, moving aside ----

const std::vector<std::string>& run_outputs() {
  static const std::vector<std::string> names = {"checkpoints", "run.json", "metrics.jsonl", "tb"};
  return names;
}

RunDirContents inspect_run_dir(const std::string& dir) {
  RunDirContents c;
  std::error_code ec;
  for (const auto& name : run_outputs())
    if (fs::exists(dir + "/" + name, ec)) c.present.push_back(name);
  if (fs::is_directory(dir + "/checkpoints", ec))
    for (const auto& e : fs::directory_iterator(dir + "/checkpoints", ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("step-", 0) == 0 && n.size() > 8 && n.substr(n.size() - 3) == ".h5") c.has_checkpoints = true;
    }
  return c;
}

StartPlan plan_start(const std::string& dir, const RunDirContents& c, const std::string& resume, bool force_new) {
  StartPlan p;
  if (force_new && resume != "none") {
    p.error = "--force-new starts a new run: use it with --resume none (it moves the old run in " + dir +
              " aside); --resume " + resume + " continues a run";
    return p;
  }
  if (resume != "none" || c.empty()) return p;
  if (force_new) {
    p.move_aside = true;
    return p;
  }
  p.error = "--resume none in run directory '" + dir + "', which already holds a run (" + join(c.present, ", ") +
            "); to continue that run use --resume auto; " + fresh_start_advice(dir);
  return p;
}

std::string move_run_aside(const std::string& dir, const std::string& utc_stamp) {
  std::error_code ec;
  std::string dest = dir + "/previous-" + utc_stamp;
  for (int n = 2; fs::exists(dest, ec); ++n) dest = dir + "/previous-" + utc_stamp + "-" + std::to_string(n);
  fs::create_directory(dest, ec);
  if (ec) fail("--force-new: cannot create '", dest, "': ", ec.message(), "; nothing was moved");
  for (const auto& name : run_outputs()) {
    const std::string from = dir + "/" + name;
    if (!fs::exists(from, ec)) continue;
    fs::rename(from, dest + "/" + name, ec);
    if (ec)
      fail("--force-new: cannot move '", from, "' to '", dest, "/': ", ec.message(),
           "; what was moved so far is in ", dest);
  }
  fsync_directory(dest);
  fsync_directory(dir);
  return dest;
}

std::string utc_now_iso8601() { return utc_format("%Y-%m-%dT%H:%M:%SZ"); }
std::string utc_now_stamp() { return utc_format("%Y%m%dT%H%M%SZ"); }

RunProgress run_progress(bool resumed, int64_t resumed_step, int64_t recorded_steps, const std::string& resume,
                         int64_t total_steps) {
  if (resumed) return resumed_step >= total_steps ? RunProgress::done : RunProgress::train;
  if (recorded_steps < 0 || resume != "auto") return RunProgress::train;
  return recorded_steps >= total_steps ? RunProgress::done_without_checkpoints : RunProgress::cannot_continue;
}

// ---- run.json across segments ----

nlohmann::json merge_run_summary(const nlohmann::json& previous, nlohmann::json now, int64_t first_step) {
  using json = nlohmann::json;
  json segments = json::array();
  json curve = json::array();
  if (previous.is_object() && first_step > 0) {
    if (previous.contains("segments") && previous["segments"].is_array()) {
      for (const auto& s : previous["segments"])
        if (s.value("last_step", int64_t{0}) <= first_step) segments.push_back(s);
    } else if (previous.value("steps", int64_t{0}) <= first_step) {
      // run.json written before segments were recorded: the whole file was one segment.
      segments.push_back({{"first_step", 0},
                          {"last_step", previous.value("steps", int64_t{0})},
                          {"world_size", previous.value("world_size", 0)},
                          {"global_batch", previous.value("global_batch", int64_t{0})},
                          {"images_per_s", previous.value("images_per_s", 0.0)},
                          {"wall_s", previous.value("wall_s", 0.0)}});
    }
    if (previous.contains("accuracy_per_epoch") && previous["accuracy_per_epoch"].is_array())
      for (const auto& e : previous["accuracy_per_epoch"])
        if (e.value("step", int64_t{0}) <= first_step) curve.push_back(e);
  }
  json seg = {{"first_step", first_step},
              {"last_step", now.value("steps", int64_t{0})},
              {"world_size", now.value("world_size", 0)},
              {"global_batch", now.value("global_batch", int64_t{0})},
              {"images_per_s", now.contains("images_per_s") ? now["images_per_s"] : json(nullptr)},  // none: killed
              {"wall_s", now.value("wall_s", 0.0)},
              {"resumed_from", now.contains("resumed_from") ? now["resumed_from"] : json(nullptr)}};
  if (now.contains("ended") && now["ended"].is_string() && now["ended"] != "finished") seg["ended"] = now["ended"];
  if (now.contains("slurm") && now["slurm"].is_object()) seg["slurm_job_id"] = now["slurm"].value("job_id", "");
  segments.push_back(seg);
  if (now.contains("accuracy_per_epoch") && now["accuracy_per_epoch"].is_array())
    for (const auto& e : now["accuracy_per_epoch"]) curve.push_back(e);
  now["accuracy_per_epoch"] = curve;
  // The latest evaluation of the whole run (this segment may have evaluated nothing).
  // (The curve's entries carry the task's headline: "accuracy", or "rmse" for a regression.)
  if ((!now.contains("test_accuracy") || now["test_accuracy"].is_null()) && !curve.empty() &&
      curve.back().contains("accuracy"))
    now["test_accuracy"] = curve.back()["accuracy"];
  if ((!now.contains("test_metrics") || now["test_metrics"].empty()) && previous.is_object() && first_step > 0 &&
      previous.contains("test_metrics") && previous["test_metrics"].is_object())
    now["test_metrics"] = previous["test_metrics"];
  now["first_step"] = first_step;
  now["segments"] = segments;
  return now;
}

// ---- RunDir ----

RunDir::RunDir(const TrainOptions& o, ControlComm& control, const std::string& host, const std::string& job_id)
    : dir_(o.run_dir), resume_(resume_text(o.resume)), control_(control), rank_(control.rank()) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  if (dir_.empty()) {
    if (o.force_new) fail_collective(rank_, "--force-new needs --run-dir (it moves an old run in that directory aside)");
    return;
  }
  std::string error, unsupported, moved;
  if (rank_ == 0) {
    try {
      LockHolder me;
      me.host = host;
      me.pid = static_cast<long>(::getpid());
      me.job_id = job_id;
      me.started = utc_now_iso8601();
      lock_ = RunDirLock::acquire(dir_, me, &unsupported);
      const StartPlan plan = plan_start(dir_, inspect_run_dir(dir_), resume_, o.force_new);
      if (!plan.error.empty()) fail(plan.error);
      if (plan.move_aside) moved = move_run_aside(dir_, utc_now_stamp());
      std::ifstream in(dir_ + "/run.json");
      if (in) {
        try {
          previous_ = parse_json(std::string(std::istreambuf_iterator<char>(in), {}));
          // A stopped or killed run's record (train/run_end.hpp) is no finished run: its
          // checkpoints say where to continue.
          if (run_json_finished(previous_)) recorded_steps_ = previous_.value("steps", int64_t{0});
        } catch (const nlohmann::json::exception&) {
          previous_ = nullptr;  // unreadable: reported by `cnnscale report`, replaced at the end of this run
        }
      }
    } catch (const UserError& e) {
      error = e.what();
    }
  }
  agree_or_fail(control_, error, "the run directory check");
  if (!unsupported.empty()) log_warn(unsupported);
  if (!moved.empty()) log_info("--force-new: the previous run in " + dir_ + " was moved to " + moved);
  control_.broadcast_value(recorded_steps_, 0, "the run directory check");
}

void RunDir::check_identity(const RunConfig& configured) const {
  if (dir_.empty()) return;
  std::string error;
  if (rank_ == 0) {
    RunConfig recorded;
    std::string source;
    for (const auto& c : checkpoint_candidates(dir_ + "/checkpoints")) {
      try {
        recorded = checkpoint_config(read_checkpoint_meta(c));
        source = c;
        break;
      } catch (const UserError&) {
        // damaged: resume reports and skips it
      }
    }
    if (source.empty() && previous_.is_object()) {
      recorded = run_json_config(previous_);
      source = dir_ + "/run.json";
    }
    const auto diff = config_differences(recorded, configured);
    if (!diff.empty())
      error = "run directory '" + dir_ + "' holds a run of another configuration (recorded in " + source +
              "): " + join(diff, "; ") + ". " + fresh_start_advice(dir_) + "; or run with the recorded options";
  }
  agree_or_fail(control_, error, "the run identity check");
}

bool RunDir::finished(bool resumed, int64_t resumed_step, int64_t total_steps) const {
  const RunProgress p =
      run_progress(resumed, resumed_step, dir_.empty() ? -1 : recorded_steps_, resume_, total_steps);
  switch (p) {
    case RunProgress::train:
      return false;
    case RunProgress::done:
      log_info("nothing to train: the run" + (dir_.empty() ? std::string() : " in " + dir_) + " is already at step " +
               std::to_string(resumed_step) + " and this run asks for " + std::to_string(total_steps) + " steps. " +
               (dir_.empty() ? std::string() : "Its run.json and metrics.jsonl are left as they are. ") +
               "To train further, raise --max-steps or --epochs (the run continues); to start over, use a new "
               "--run-dir or --resume none --force-new");
      if (!dir_.empty() && recorded_steps_ < 0)
        log_warn(dir_ + " has no run.json of a finished run: the run ended between its last checkpoint and its "
                 "summary (killed at the last step?); its timings are in metrics.jsonl only");
      return true;
    case RunProgress::done_without_checkpoints:
      log_info("nothing to train: " + dir_ + "/run.json records a finished run of " +
               std::to_string(recorded_steps_) + " steps (its checkpoints are gone) and this run asks for " +
               std::to_string(total_steps) +
               "; run.json is left as it is. To start over, use a new --run-dir or --resume none --force-new");
      return true;
    case RunProgress::cannot_continue:
      break;
  }
  fail_collective(rank_, dir_, "/run.json records a finished run of ", recorded_steps_,
                  " steps but no checkpoint is left to continue it to ", total_steps, " steps; ",
                  fresh_start_advice(dir_));
}

nlohmann::json RunDir::start_record(int64_t first_step, int world, int64_t global_batch,
                                    const std::string& resumed_from, const std::string& digest) const {
  return {{"event", "start"},
          {"from_step", first_step},
          {"world_size", world},
          {"global_batch", global_batch},
          {"resumed_from", resumed_from.empty() ? nlohmann::json(nullptr) : nlohmann::json(resumed_from)},
          {"config_digest", digest},
          {"time", utc_now_iso8601()}};
}

nlohmann::json RunDir::summarize(nlohmann::json now, int64_t first_step) const {
  return merge_run_summary(previous_, std::move(now), first_step);
}

bool RunDir::previous_finished() const { return run_json_finished(previous_); }

}  // namespace cnnscale
