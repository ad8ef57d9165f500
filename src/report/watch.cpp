// watch.cpp — see watch.hpp.
#include "report/watch.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.hpp"

namespace cnnscale::report {
namespace fs = std::filesystem;
namespace {

std::string num(const nlohmann::json& j, const char* key, const char* fmt, double scale = 1) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, it->get<double>() * scale);
  return buf;
}

// j[key] when j is an object holding a value of T's kind there, else def: a metrics line
// written by something else ({"event": 5}, {"step": "x"}) is shown as far as it makes
// sense and never ends the watch.
int64_t field(const nlohmann::json& j, const char* key, int64_t def) {
  if (!j.is_object()) return def;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return def;
  const double d = it->get<double>();
  return std::isfinite(d) && std::fabs(d) < 9e18 ? static_cast<int64_t>(d) : def;
}
double field(const nlohmann::json& j, const char* key, double def) {
  if (!j.is_object()) return def;
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}
std::string field(const nlohmann::json& j, const char* key, const std::string& def) {
  if (!j.is_object()) return def;
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : def;
}

// run.lock's holder (train/run_dir.hpp LockHolder, as JSON) as "pid P on HOST[, Slurm job J]";
// "" when the text is not a holder record.
std::string holder_text(const std::string& lock_text) {
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(lock_text);
  } catch (const nlohmann::json::exception&) {
    return "";
  }
  if (!h.is_object()) return "";
  const std::string job = field(h, "job_id", std::string());
  return "pid " + std::to_string(field(h, "pid", int64_t{0})) + " on " + field(h, "host", std::string("?")) +
         (job.empty() ? std::string() : ", Slurm job " + job);
}

std::string duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const long t = std::lround(s);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

}  // namespace

bool MetricsTail::poll(std::vector<nlohmann::json>& out) {
  std::error_code ec;
  const auto size = fs::file_size(path_, ec);
  if (ec) return false;
  if (size < offset_) {  // moved aside or rewritten: a new file
    offset_ = 0;
    partial_.clear();
  }
  if (size == offset_) return true;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return false;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk(static_cast<size_t>(size - offset_), '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<size_t>(in.gcount()));
  offset_ += chunk.size();
  partial_ += chunk;
  size_t begin = 0;
  for (size_t nl; (nl = partial_.find('\n', begin)) != std::string::npos; begin = nl + 1) {
    const std::string line = partial_.substr(begin, nl - begin);
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
      ++bad_;
    }
  }
  partial_.erase(0, begin);
  return true;
}

void WatchView::add(const nlohmann::json& r) {
  if (!r.is_object()) return;
  const std::string event = field(r, "event", std::string());
  if (event == "start") {
    start = r;
    rows.clear();
    ended = false;
    end_line = nullptr;
  } else if (event == "end") {
    end_line = r;
  } else if (event == "eval") {
    if (!r.contains("step") || !r["step"].is_number()) return;  // not ours: shown nowhere
    evals.push_back(r);
    while (evals.size() > 5) evals.pop_front();
  } else if (event.empty() && r.contains("step") && r["step"].is_number()) {
    rows.push_back(r);
    while (rows.size() > max_rows) rows.pop_front();
  }
}

LockProbe probe_run_lock(const std::string& run_dir, std::string* who) {
  const std::string path = run_dir + "/run.lock";  // train/run_dir.cpp kRunLockFile
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return LockProbe::unknown;
  LockProbe r = LockProbe::unknown;
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
    ::flock(fd, LOCK_UN);
    r = LockProbe::free;
  } else if (errno == EWOULDBLOCK) {
    r = LockProbe::held;
  }
  if (who) {
    char buf[1024];
    const ssize_t k = ::pread(fd, buf, sizeof(buf), 0);
    who->assign(buf, k > 0 ? static_cast<size_t>(k) : 0);
  }
  ::close(fd);
  return r;
}

bool run_ended(const std::string& run_dir, const nlohmann::json& start, nlohmann::json* summary) {
  std::ifstream in(run_dir + "/run.json");
  if (!in) return false;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return false;  // being replaced (written atomically, so only an old damaged file)
  }
  const int64_t from = start.is_object() ? field(start, "from_step", int64_t{0}) : -1;
  const auto steps = j.find("steps");
  if (steps == j.end() || !steps->is_number()) return false;
  // A record of an early end (train/run_end.hpp) names the segment it ends by first_step.
  const std::string ended = field(j, "ended", std::string("finished"));
  const bool this_segment = ended != "finished" ? field(j, "first_step", int64_t{-2}) == from
                                                : field(j, "steps", int64_t{0}) > from;
  if (!this_segment) return false;
  if (summary) *summary = j;
  return true;
}

MetricsEnd read_metrics_end(const std::string& run_dir) {
  MetricsEnd m;
  const std::string path = run_dir + "/metrics.jsonl";
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return m;
  m.exists = true;
  std::ifstream in(path, std::ios::binary);
  const uint64_t window = 1 << 20;
  if (size > window) in.seekg(static_cast<std::streamoff>(size - window));
  std::string line;
  if (size > window) std::getline(in, line);  // the first line read may be a part
  while (std::getline(in, line)) {
    nlohmann::json r;
    try {
      r = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    if (!r.is_object()) continue;
    const std::string event = field(r, "event", std::string());
    if (event == "start") {
      m.start_step = field(r, "from_step", int64_t{0});
      m.ended.clear();
    } else if (event == "end") {
      m.ended = field(r, "ended", std::string());
    } else if (event.empty() && r.contains("step")) {
      m.last_step = std::max(m.last_step, field(r, "step", int64_t{-1}));
    }
  }
  return m;
}

std::string describe_unfinished(const std::string& run_dir) {
  std::error_code ec;
  if (fs::exists(run_dir + "/run.json", ec)) return "";
  const MetricsEnd m = read_metrics_end(run_dir);
  if (!m.exists) return "no run.json and no metrics.jsonl: no `cnnscale train --run-dir` run has started there";
  std::string who;
  const LockProbe lock = probe_run_lock(run_dir, &who);
  const std::string holder = holder_text(who);
  const std::string at = m.last_step >= 0 ? "step " + std::to_string(m.last_step) + " (metrics.jsonl's last progress line)"
                                          : "step " + std::to_string(m.start_step) + " (no progress line yet)";
  if (lock == LockProbe::held)
    return "still running" + (holder.empty() ? std::string() : " (" + holder + " holds run.lock)") + ", at " + at;
  if (!m.ended.empty()) return "ended early after " + at + ": " + m.ended;
  return std::string(lock == LockProbe::free ? "killed" : "ended without a record") + " after " + at +
         ": no run.json, and " +
         (lock == LockProbe::free ? "no process holds run.lock" + (holder.empty() ? std::string() : " (its last holder: " + holder + ")")
                                  : std::string("its file system has no locks to tell whether it still runs")) +
         " (a SIGKILL, out of memory, or a node's loss); its job's output names the cause, and "
         "`cnnscale train ... --resume auto` continues from its last checkpoint";
}

std::string watch_state_line(const WatchView& v) {
  std::ostringstream os;
  const nlohmann::json last = v.rows.empty() ? nlohmann::json(nullptr) : v.rows.back();
  if (v.ended && !v.stopped.empty()) {
    os << "stopped: " << v.stopped;
    if (v.run_json.is_object() && v.run_json.contains("steps"))
      os << " (" << field(v.run_json, "steps", int64_t{0}) << " steps done)";
    os << "; `cnnscale train ... --resume auto` continues from its last checkpoint";
  } else if (v.ended) {
    os << "finished: " << field(v.run_json, "steps", int64_t{0}) << " steps in "
       << duration(field(v.run_json, "wall_s", -1.0)) << ", median " << num(v.run_json, "images_per_s", "%.0f")
       << " img/s";
    if (v.run_json.contains("test_accuracy") && v.run_json["test_accuracy"].is_number())
      os << ", test accuracy " << num(v.run_json, "test_accuracy", "%.4f");
    if (v.run_json.contains("timeline") && v.run_json["timeline"].is_string())
      os << "; timeline " << v.run_json["timeline"].get<std::string>();
  } else if (v.gone) {
    os << "ended without finishing: no process holds " << v.run_dir << "/run.lock";
    if (const std::string h = holder_text(v.holder); !h.empty()) os << " (its last holder: " << h << ")";
    os << " and run.json records no end: the run was stopped or killed (a signal, out of memory, a rank's or "
          "node's death)";
    if (last.is_object()) os << " after step " << field(last, "step", int64_t{0});
    os << "; its output names the cause, and `cnnscale train ... --resume auto` continues from its last checkpoint";
  } else if (last.is_object()) {
    const int64_t step = field(last, "step", int64_t{0}), total = field(last, "total_steps", int64_t{0});
    os << "running: step " << step;
    if (total > 0) os << "/" << total << " (" << (100 * step / total) << "%)";
    if (last.contains("eta_s") && last["eta_s"].is_number()) os << ", ETA " << duration(last["eta_s"].get<double>());
    if (v.seconds_since_update >= 0) os << ", last update " << std::lround(v.seconds_since_update) << " s ago";
  } else {
    os << "running: no progress line yet";
  }
  os << "\n";
  return os.str();
}

std::string watch_row(const nlohmann::json& r) {
  char line[256];
  std::snprintf(line, sizeof(line), "%8s %5s %9s %10s %10s %9s %10s %9s\n", num(r, "step", "%.0f").c_str(),
                num(r, "epoch", "%.0f").c_str(), num(r, "loss", "%.4f").c_str(), num(r, "lr", "%.4g").c_str(),
                num(r, "images_per_s", "%.0f").c_str(), num(r, "step_ms", "%.1f").c_str(),
                num(r, "slowest_step_ms", "%.1f").c_str(), duration(field(r, "elapsed_s", -1.0)).c_str());
  return line;
}

std::string watch_eval_line(const nlohmann::json& e) {
  std::ostringstream os;
  os << "eval epoch " << field(e, "epoch", int64_t{0}) << " (step " << field(e, "step", int64_t{0}) << "): test accuracy "
     << num(e, "test_accuracy", "%.4f") << ", loss " << num(e, "test_loss", "%.4f") << "\n";
  return os.str();
}

std::string render_watch(const WatchView& v) {
  std::ostringstream os;
  os << v.run_dir;
  if (v.start.is_object()) {
    const int64_t from = field(v.start, "from_step", int64_t{0});
    os << ": " << field(v.start, "world_size", int64_t{0}) << " rank(s), global batch "
       << field(v.start, "global_batch", int64_t{0}) << ", started " << field(v.start, "time", std::string("?"))
       << (from > 0 ? " (resumed at step " + std::to_string(from) + ")" : std::string());
  }
  os << "\n" << watch_state_line(v);
  char line[256];
  std::snprintf(line, sizeof(line), "%8s %5s %9s %10s %10s %9s %10s %9s\n", "step", "epoch", "loss", "lr", "images/s",
                "step ms", "slowest ms", "elapsed");
  os << line;
  for (const auto& r : v.rows) os << watch_row(r);
  for (const auto& e : v.evals) os << watch_eval_line(e);
  return os.str();
}

void check_watch_dir(const std::string& run_dir) {
  std::error_code ec;
  if (!fs::exists(run_dir, ec))
    fail("watch: run directory '", run_dir, "' does not exist; give the --run-dir of a `cnnscale train` run");
  if (!fs::is_directory(run_dir, ec))
    fail("watch: '", run_dir, "' is not a directory; give the --run-dir of a `cnnscale train` run");
  if (!fs::exists(run_dir + "/metrics.jsonl", ec))
    fail("watch: '", run_dir,
         "' holds no metrics.jsonl, so no training has started there yet; check the path, or "
         "start watching once the job runs (squeue) — train writes it when its first step begins");
}

}  // namespace cnnscale::report
