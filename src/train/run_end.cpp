// run_end.cpp — see run_end.hpp.
#include "train/run_end.hpp"

#include <poll.h>

#include <chrono>
#include <cmath>

#include "train/run_dir.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/stop_signal.hpp"

namespace cnnscale {
namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

bool run_json_finished(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  const auto e = j.find("ended");
  return e == j.end() || (e->is_string() && e->get<std::string>() == "finished");
}

RunEnd::~RunEnd() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void RunEnd::open(const std::string& dir, bool previous_finished, MetricsLog* metrics,
                  std::function<nlohmann::json(nlohmann::json)> merge, nlohmann::json base) {
  dir_ = dir;
  previous_finished_ = previous_finished;
  metrics_ = metrics;
  merge_ = std::move(merge);
  base_ = std::move(base);
}

void RunEnd::set_progress(int64_t steps_done, double last_loss, double wall_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  steps_done_.store(steps_done);
  loss_ = last_loss;
  wall_ = wall_s;
}

void RunEnd::watch_signals(std::function<std::string()> waiting_in,
                           std::function<bool(double, std::vector<std::string>*)> unanswered) {
  if (!enabled() || thread_.joinable() || stop_signal_fd() < 0) return;
  waiting_in_ = std::move(waiting_in);
  unanswered_ = std::move(unanswered);
  thread_ = std::thread([this] { watch_loop(); });
}

void RunEnd::watch_loop() {
  pollfd p{stop_signal_fd(), POLLIN, 0};
  while (!stopping_ && !final_) {
    p.revents = 0;
    if (::poll(&p, 1, 100) > 0 && (p.revents & POLLIN)) {
      stuck_record(stop_signal_received());
      return;
    }
  }
}

void RunEnd::stuck_record(int sig) {
  // The boundary normally comes within a step: the trainer's own record then stands.
  const double t0 = now_s();
  while (now_s() - t0 < kBoundaryGrace) {
    if (final_ || stopping_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (final_ || stopping_) return;
  const std::string what = waiting_in_ ? waiting_in_() : std::string();
  std::vector<std::string> silent;
  const bool asked = unanswered_ && unanswered_(kPokeWait, &silent);
  const std::string signal = stop_signal_name(sig);
  const std::string step = std::to_string(steps_done_.load());
  std::string ended;
  if (asked && !silent.empty()) {
    for (const auto& s : silent) ended += (ended.empty() ? "" : ", ") + s;
    ended += " died or hung: no answer from " + std::string(silent.size() > 1 ? "them" : "it") + " after " + signal +
             " following step " + step + (what.empty() ? "" : ", while rank 0 waited in " + what) +
             " (its launcher then ends the job; that rank's own output, if any, says why)";
  } else {
    ended = "signal " + signal + " after step " + step + ", before the next step boundary" +
            (what.empty() ? "" : " (rank 0 waited in " + what + ")") +
            (asked ? "; every rank still answered" : "");
  }
  write(ended, nullptr, false);
}

void RunEnd::write(const std::string& ended, nlohmann::json summary, bool final) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (final_) return;  // the run's last word was said
  if (final) final_ = true;
  const bool finished = ended == "finished";
  try {
    if (summary.is_null()) {
      summary = base_;
      summary["steps"] = steps_done_.load();
      summary["train_loss"] = std::isfinite(loss_) ? nlohmann::json(loss_) : nlohmann::json(nullptr);
      summary["wall_s"] = wall_;
    }
    summary["ended"] = ended;
    summary["finished"] = finished;
    if (!finished) summary["ended_time"] = utc_now_iso8601();
    if (metrics_ && !finished)
      metrics_->append({{"event", "end"}, {"ended", ended}, {"step", steps_done_.load()}, {"time", utc_now_iso8601()}});
    if (finished || !previous_finished_) {
      write_run_json(dir_, merge_ ? merge_(std::move(summary)) : summary);
      if (!finished) log_info("wrote " + dir_ + "/run.json: ended: " + ended);
    } else {
      log_info(dir_ + "/run.json keeps the finished run's summary; metrics.jsonl records how this continuation "
               "ended: " + ended);
    }
  } catch (const std::exception& e) {  // the process is ending: say it, never throw
    log_warn("could not record how the run ended in " + dir_ + ": " + e.what());
  }
}

}  // namespace cnnscale
