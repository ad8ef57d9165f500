// watch.cpp — see watch.hpp.
#include "report/watch.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "report/json_file.hpp"
#include "util/error.hpp"
#include "util/process.hpp"
#include "util/json_bounded.hpp"

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

// run.lock's text as its holder record (a JSON object), or null when it is not one.
nlohmann::json holder_record(const std::string& lock_text) {
  try {
    nlohmann::json h = parse_json(lock_text);
    if (h.is_object()) return h;
  } catch (const nlohmann::json::exception&) {
  }
  return nullptr;
}

// run.lock's holder (train/run_dir.hpp LockHolder, as JSON) as "pid P on HOST[, Slurm job J]";
// "" when the text is not a holder record.
std::string holder_text(const std::string& lock_text) {
  const nlohmann::json h = holder_record(lock_text);
  if (h.is_null()) return "";
  const std::string job = field(h, "job_id", std::string());
  return "pid " + std::to_string(field(h, "pid", int64_t{0})) + " on " + field(h, "host", std::string("?")) +
         (job.empty() ? std::string() : ", Slurm job " + job);
}

// A value as the file holds it, cut to 40 characters, control characters as '?'.
std::string brief(const std::string& line) {
  std::string t = line.size() > 40 ? line.substr(0, 37) + "..." : line;
  for (char& c : t)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return t;
}
std::string brief(const nlohmann::json& v) {
  return brief(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

const char* type_name(const nlohmann::json& v) {
  if (v.is_string()) return "text";
  if (v.is_number()) return "a number";
  if (v.is_boolean()) return "true/false";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

// The first field of run.json that watch reads and finds of the wrong type, as
// "\"steps\" is \"10\" (text), not a whole number"; "" when all are right. Those that decide
// whether the run ended (steps, first_step, ended) when `deciding`, else those only shown.
std::string wrong_run_json_field(const nlohmann::json& j, bool deciding) {
  auto whole = [](const nlohmann::json& v) {
    return v.is_number() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>() &&
           v.get<double>() >= 0 && v.get<double>() < 9e18;
  };
  auto is = [&](const nlohmann::json& v, const char* key, const char* want) {
    return "\"" + std::string(key) + "\" is " + brief(v) + " (" + type_name(v) + "), not " + want;
  };
  if (deciding) {
    const auto steps = j.find("steps");
    if (steps == j.end()) return "\"steps\" is missing (the steps the run did)";
    if (!whole(*steps)) return is(*steps, "steps", "a whole number");
    if (const auto f = j.find("first_step"); f != j.end() && !whole(*f)) return is(*f, "first_step", "a whole number");
    if (const auto e = j.find("ended"); e != j.end() && !e->is_string()) return is(*e, "ended", "text");
    return "";
  }
  if (const auto t = j.find("timeline"); t != j.end() && !t->is_null() && !t->is_string())
    return is(*t, "timeline", "text");
  for (const char* key : {"wall_s", "images_per_s", "test_accuracy"})
    if (const auto v = j.find(key); v != j.end() && !v->is_null() && !v->is_number()) return is(*v, key, "a number");
  return "";
}

std::string duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const long t = std::lround(s);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

}  // namespace

namespace {
constexpr uint64_t kReadChunk = uint64_t{4} << 20;  // bytes read per step of a poll
constexpr size_t kMaxLine = size_t{1} << 20;        // a longer line is no record
}  // namespace

bool MetricsTail::poll(const std::function<void(MetricsLine&&)>& each) {
  std::error_code ec;
  const auto size = fs::file_size(path_, ec);
  if (ec) return false;
  if (size < offset_) {  // moved aside or rewritten: a new file
    offset_ = 0;
    line_ = 0;
    partial_.clear();
    overlong_ = false;
  }
  if (size == offset_) return true;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return false;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk;
  while (offset_ < size) {
    chunk.resize(static_cast<size_t>(std::min(kReadChunk, size - offset_)));
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<size_t>(in.gcount());
    if (got == 0) break;
    offset_ += got;
    take(chunk.data(), got, each);
  }
  return true;
}

void MetricsTail::take(const char* data, size_t n, const std::function<void(MetricsLine&&)>& each) {
  for (size_t begin = 0; begin < n;) {
    const auto* nl = static_cast<const char*>(std::memchr(data + begin, '\n', n - begin));
    const size_t end = nl ? static_cast<size_t>(nl - data) : n;
    if (!overlong_) partial_.append(data + begin, end - begin);
    if (partial_.size() > kMaxLine) {
      overlong_ = true;
      partial_.clear();
      partial_.shrink_to_fit();
    }
    if (!nl) break;
    begin = end + 1;
    ++line_;
    MetricsLine l;
    l.number = line_;
    if (overlong_) {
      l.error = "longer than 1 MiB";
    } else if (partial_.empty()) {
      continue;  // a blank line
    } else {
      try {
        l.record = parse_json(partial_);
      } catch (const nlohmann::json::exception&) {
        l.error = "not JSON: " + brief(partial_);
      }
    }
    if (!l.error.empty()) ++bad_;
    overlong_ = false;
    partial_.clear();
    each(std::move(l));
  }
}

std::string WatchView::add(const nlohmann::json& r) {
  if (!r.is_object()) return "not a JSON object but " + brief(r);
  const auto ev = r.find("event");
  if (ev != r.end() && !ev->is_string()) return "its \"event\" is " + brief(*ev) + ", not text";
  const std::string event = ev == r.end() ? std::string() : ev->get<std::string>();
  const auto step = r.find("step");
  if (event == "start") {
    start = r;
    rows.clear();
    ended = false;
    end_line = nullptr;
  } else if (event == "end") {
    end_line = r;
  } else if (event == "eval") {
    if (step == r.end() || !step->is_number())
      return "an evaluation whose \"step\" is " + (step == r.end() ? std::string("missing") : brief(*step)) +
             ", not a number";
    evals.push_back(r);
    while (evals.size() > 5) evals.pop_front();
  } else if (!event.empty()) {
    return "an event \"" + brief(event) + "\" that watch does not know";
  } else if (step == r.end()) {
    return "neither a progress line (no \"step\") nor an event";
  } else if (!step->is_number()) {
    return "its \"step\" is " + brief(*step) + ", not a number";
  } else {
    rows.push_back(r);
    while (rows.size() > max_rows) rows.pop_front();
  }
  return "";
}

void WatchView::skip(int64_t number, const std::string& why) {
  ++skipped;
  if (skipped_first.size() < 3) skipped_first.push_back("line " + std::to_string(number) + ": " + why);
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

bool run_ended(const std::string& run_dir, const nlohmann::json& start, nlohmann::json* summary, std::string* problem,
               std::string* shown_wrong) {
  if (problem) problem->clear();
  if (shown_wrong) shown_wrong->clear();
  const std::string path = run_dir + "/run.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) return false;
  auto cannot_tell = [&](const std::string& why) {
    if (problem) *problem = why;
    return false;
  };
  // Written whole (util/atomic_file.hpp): a file that does not parse is damaged, not half-written.
  nlohmann::json j;
  try {
    j = parse_json(read_input_text(path, path + ": cannot be read"));
  } catch (const UserError& e) {
    return cannot_tell(e.what());
  } catch (const nlohmann::json::exception& e) {
    return cannot_tell(path + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object()) return cannot_tell(path + ": not a JSON object but " + brief(j));
  if (const std::string wrong = wrong_run_json_field(j, true); !wrong.empty()) return cannot_tell(path + ": " + wrong);
  if (const std::string wrong = wrong_run_json_field(j, false); !wrong.empty() && shown_wrong)
    *shown_wrong = path + ": " + wrong;
  const int64_t from = start.is_object() ? field(start, "from_step", int64_t{0}) : -1;
  // A record of an early end (train/run_end.hpp) names the segment it ends by first_step.
  const std::string ended = field(j, "ended", std::string("finished"));
  const bool this_segment = ended != "finished" ? field(j, "first_step", int64_t{-2}) == from
                                                : field(j, "steps", int64_t{0}) > from;
  if (!this_segment) return false;
  if (summary) *summary = j;
  return true;
}

std::string lock_squatter(const std::string& run_dir, const std::string& lock_text) {
  const nlohmann::json h = holder_record(lock_text);
  if (h.is_null()) return "";
  return lock_taken_by_other(run_dir + "/run.lock", field(h, "host", std::string()), field(h, "pid", int64_t{0}));
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
      r = parse_json(line);
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
  const std::string squatter = lock == LockProbe::held ? lock_squatter(run_dir, who) : "";
  if (lock == LockProbe::held && squatter.empty())
    return "still running" + (holder.empty() ? std::string() : " (" + holder + " holds run.lock)") + ", at " + at;
  if (!squatter.empty())
    return "killed after " + at + ": no run.json; run.lock names " + holder +
           " as its holder, which no longer runs, and " + squatter +
           " holds the lock now: not a training of this run, which would have recorded itself there; end that "
           "process, and `cnnscale train ... --resume auto` continues from the last checkpoint";
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
    else if (v.run_json.contains("test_metrics") && v.run_json["test_metrics"].is_object() &&
             v.run_json["test_metrics"].contains("rmse"))  // a regression
      os << ", test rmse " << num(v.run_json["test_metrics"], "rmse", "%.4f");
    else if (v.run_json.contains("test_metrics") && v.run_json["test_metrics"].is_object() &&
             v.run_json["test_metrics"].contains("miou"))  // a segmentation
      os << ", test miou " << num(v.run_json["test_metrics"], "miou", "%.4f");
    if (v.run_json.contains("timeline") && v.run_json["timeline"].is_string())
      os << "; timeline " << v.run_json["timeline"].get<std::string>();
  } else if (v.gone) {
    const std::string h = holder_text(v.holder);
    // Why the run is over: its lock is free, or held by another process than the (dead) training it names.
    std::string lock = v.squatter.empty()
                           ? "no process holds " + v.run_dir + "/run.lock" +
                                 (h.empty() ? std::string() : " (its last holder: " + h + ")")
                           : v.run_dir + "/run.lock names " + (h.empty() ? std::string("a training") : h) +
                                 " as its holder, which no longer runs, and " + v.squatter +
                                 " holds the lock now: not a training of this run, which would have recorded "
                                 "itself there";
    const std::string step = last.is_object() ? std::to_string(field(last, "step", int64_t{0})) : "";
    if (!v.run_json_problem.empty()) {
      os << "ended, but how cannot be told: " << lock << ", and " << v.run_json_problem
         << " (cnnscale train writes run.json whole: something else wrote or damaged it)";
      if (!step.empty()) os << "; metrics.jsonl's last progress line is step " << step;
      os << "; the job's output says how it ended";
    } else {
      os << "ended without finishing: " << lock << (v.squatter.empty() ? " and" : "; and")
         << " run.json records no end: the run was stopped or killed (a signal, out of memory, a rank's or "
            "node's death)";
      if (!step.empty()) os << " after step " << step;
      os << "; its output names the cause";
    }
    if (!v.squatter.empty()) os << "; end that process first (train would find the directory locked)";
    os << ", and `cnnscale train ... --resume auto` continues from its last checkpoint";
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
  os << "eval epoch " << field(e, "epoch", int64_t{0}) << " (step " << field(e, "step", int64_t{0}) << "): ";
  if (e.contains("test_rmse") && !e.contains("test_accuracy"))  // a regression
    os << "test rmse " << num(e, "test_rmse", "%.4f") << ", mae " << num(e, "test_mae", "%.4f");
  else if (e.contains("test_miou") && !e.contains("test_accuracy"))  // a segmentation
    os << "test miou " << num(e, "test_miou", "%.4f") << ", pixel accuracy " << num(e, "test_pixel_accuracy", "%.4f");
  else
    os << "test accuracy " << num(e, "test_accuracy", "%.4f");
  os << ", loss " << num(e, "test_loss", "%.4f") << "\n";
  return os.str();
}

std::string watch_notes(const WatchView& v) {
  std::string s;
  if (!v.run_json_problem.empty() && !v.gone)  // when gone, the state line says it
    s += "note: " + v.run_json_problem + ": watch cannot tell from it whether or how the run ended\n";
  if (!v.run_json_shown_wrong.empty()) s += "note: " + v.run_json_shown_wrong + ": not shown\n";
  if (v.skipped > 0) {
    s += "note: " + std::to_string(v.skipped) + " line(s) of " + v.run_dir +
         "/metrics.jsonl skipped, no record watch can show: ";
    for (size_t i = 0; i < v.skipped_first.size(); ++i) s += (i ? "; " : "") + v.skipped_first[i];
    if (v.skipped > static_cast<int64_t>(v.skipped_first.size()))
      s += "; and " + std::to_string(v.skipped - static_cast<int64_t>(v.skipped_first.size())) + " more";
    s += "\n";
  }
  return s;
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
  os << watch_notes(v);
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
