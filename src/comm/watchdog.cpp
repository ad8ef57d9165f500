// watchdog.cpp — see watchdog.hpp.
#include "comm/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "util/error.hpp"

namespace cnnscale {
namespace {
constexpr int kTagBeat = 71, kTagBye = 72, kTagPoke = 73;
constexpr double kTick = 0.05;  // seconds between polls for messages (beats go out every interval)
// Seconds on a monotonic clock (no MPI call: start_local runs where MPI may be a
// singleton or, in tests, not started).
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Watchdog::~Watchdog() { stop(); }

bool Watchdog::start(MPI_Comm world, double timeout_s, const std::string& host) {
  int level = 0, size = 1;
  MPI_Query_thread(&level);
  MPI_Comm_size(world, &size);
  if (level < MPI_THREAD_MULTIPLE || size < 2 || timeout_s <= 0) return false;
  configure(timeout_s, false);
  MPI_Comm_dup(world, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  size_ = size;
  char name[64] = {0};
  std::snprintf(name, sizeof(name), "%s", host.c_str());
  std::vector<char> all(64 * static_cast<size_t>(size_));
  MPI_Allgather(name, 64, MPI_CHAR, all.data(), 64, MPI_CHAR, comm_);
  for (int r = 0; r < size_; ++r) hosts_.emplace_back(&all[64 * static_cast<size_t>(r)]);
  const double now = now_s();
  last_heard_.assign(rank_ == 0 ? static_cast<size_t>(size_) : 1, now);
  last_step_.assign(static_cast<size_t>(size_), 0);
  thread_ = std::thread([this] { run(); });
  return true;
}

void Watchdog::configure(double timeout_s, bool local) {
  local_ = local;
  stopping_ = false;
  timeout_ = timeout_s;
  interval_ = std::clamp(timeout_s / 10.0, 0.05, 1.0);
}

bool Watchdog::start_local(int rank, double timeout_s, const std::string& host) {
  if (timeout_s <= 0 || thread_.joinable()) return thread_.joinable();
  configure(timeout_s, true);
  rank_ = rank;
  hosts_.assign(static_cast<size_t>(rank) + 1, "");
  hosts_[static_cast<size_t>(rank)] = host;
  thread_ = std::thread([this] { run(); });
  return true;
}

void Watchdog::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  thread_.join();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Watchdog::enter(const char* what) {
  if (!thread_.joinable()) return;
  what_.store(what);
  entered_at_.store(now_s());
}

void Watchdog::leave() { entered_at_.store(-1); }

std::string Watchdog::waiting_in() const { return entered_at_.load() >= 0 ? std::string(what_.load()) : std::string(); }

bool Watchdog::unanswered(double wait_s, std::vector<std::string>* silent) {
  if (!thread_.joinable() || local_ || rank_ != 0 || stopping_) return false;
  const double asked = now_s();
  poke_requested_ = true;
  // The thread sends the pokes at its next tick; then the answers have wait_s.
  while (poke_sent_at_.load() < asked && now_s() - asked < 1.0)
    std::this_thread::sleep_for(std::chrono::duration<double>(kTick / 5));
  const double sent = poke_sent_at_.load();
  if (sent < asked) return false;  // the thread is not polling (stopping)
  std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
  std::lock_guard<std::mutex> lock(heard_mutex_);
  for (int r = 1; r < size_; ++r)
    if (last_heard_[static_cast<size_t>(r)] < sent) silent->push_back("rank " + std::to_string(r) + " on " + hosts_[static_cast<size_t>(r)]);
  return true;
}

void Watchdog::run() {
  if (local_) {  // this rank's waits only
    while (!stopping_) {
      const double since = entered_at_.load();
      if (since >= 0 && now_s() - since > timeout_) fire(now_s() - since);
      std::this_thread::sleep_for(std::chrono::duration<double>(interval_));
    }
    return;
  }
  int64_t msg[2];
  int byes = 0;
  const double stop_deadline_span = 2.0;
  double stop_deadline = -1, last_beat = -1;
  while (true) {
    const double now = now_s();
    if (stopping_ && stop_deadline < 0) {
      stop_deadline = now + stop_deadline_span;
      if (rank_ != 0) {  // say goodbye so rank 0 stops listening; then we are done
        int64_t bye[2] = {-1, -1};
        MPI_Send(bye, 2, MPI_INT64_T, 0, kTagBye, comm_);
      }
    }
    // Heartbeats out: every rank to rank 0, rank 0 to every rank.
    if (!stopping_ && now - last_beat >= interval_) {
      last_beat = now;
      // Isend's buffers are members: the message may leave after this iteration.
      int64_t* beat = out_beat_;
      beat[0] = step_.load(std::memory_order_relaxed);
      beat[1] = 0;
      if (rank_ == 0) {
        for (int r = 1; r < size_; ++r) {
          MPI_Request req;
          MPI_Isend(beat, 2, MPI_INT64_T, r, kTagBeat, comm_, &req);
          MPI_Request_free(&req);
        }
      } else {
        MPI_Request req;
        MPI_Isend(beat, 2, MPI_INT64_T, 0, kTagBeat, comm_, &req);
        MPI_Request_free(&req);
      }
    }
    // Rank 0 asked by unanswered(): a poke to every rank, answered at its next tick.
    if (rank_ == 0 && !stopping_ && poke_requested_.exchange(false)) {
      int64_t* poke = out_poke_;
      poke[0] = step_.load(std::memory_order_relaxed);
      poke[1] = 0;
      for (int r = 1; r < size_; ++r) {
        MPI_Request req;
        MPI_Isend(poke, 2, MPI_INT64_T, r, kTagPoke, comm_, &req);
        MPI_Request_free(&req);
      }
      poke_sent_at_.store(now_s());
    }
    // Heartbeats in: drain everything that arrived.
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &st);
      if (!flag) break;
      MPI_Recv(msg, 2, MPI_INT64_T, st.MPI_SOURCE, st.MPI_TAG, comm_, MPI_STATUS_IGNORE);
      if (st.MPI_TAG == kTagBye) {
        ++byes;
        continue;
      }
      if (st.MPI_TAG == kTagPoke && rank_ != 0 && !stopping_) {  // rank 0 asks: answer now
        int64_t* answer = out_answer_;
        answer[0] = step_.load(std::memory_order_relaxed);
        answer[1] = 1;
        MPI_Request req;
        MPI_Isend(answer, 2, MPI_INT64_T, 0, kTagBeat, comm_, &req);
        MPI_Request_free(&req);
      }
      const size_t idx = rank_ == 0 ? static_cast<size_t>(st.MPI_SOURCE) : 0;
      {
        std::lock_guard<std::mutex> lock(heard_mutex_);
        last_heard_[idx] = now_s();
      }
      last_step_[static_cast<size_t>(st.MPI_SOURCE)] = msg[0];
    }
    if (stopping_) {
      // Non-root ranks leave after their goodbye; rank 0 drains until all said it
      // (so no heartbeat is left unmatched at MPI_Finalize) or the deadline passes.
      if (rank_ != 0 || byes >= size_ - 1 || now_s() > stop_deadline) return;
    } else {
      const double since = entered_at_.load();
      if (since >= 0 && now_s() - since > timeout_) {
        // Non-root ranks defer to rank 0 while it is alive (it can name the culprit),
        // for one extra timeout at most.
        const bool root_alive = rank_ != 0 && now_s() - last_heard_[0] < timeout_ / 2;
        if (rank_ == 0 || !root_alive || now_s() - since > 2 * timeout_) fire(now_s() - since);
      }
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(interval_, kTick)));
  }
}

void Watchdog::fire(double waited) {
  const double now = now_s();
  char head[256];
  std::snprintf(head, sizeof(head), "rank %d on %s waited %.0f s in %s at step %lld (--collective-timeout %.0f): ",
                rank_, hosts_[static_cast<size_t>(rank_)].c_str(), waited, what_.load(),
                static_cast<long long>(step_.load()), timeout_);
  std::string msg = head;
  if (local_) {
    msg += "a peer stopped, is stuck outside communication, or the network failed (the ranks met through a "
           "rendezvous store: no heartbeat names which). Stopping this rank; see the other ranks' messages";
  } else if (rank_ == 0) {
    std::string silent, lagging;
    auto add = [](std::string& list, const std::string& item) {
      if (!list.empty()) list.append(", ");
      list.append(item);
    };
    int64_t newest = step_.load();
    for (int r = 1; r < size_; ++r) newest = std::max(newest, last_step_[static_cast<size_t>(r)]);
    for (int r = 1; r < size_; ++r) {
      const std::string who = "rank " + std::to_string(r) + " on " + hosts_[static_cast<size_t>(r)];
      if (now - last_heard_[static_cast<size_t>(r)] > timeout_ / 2)
        add(silent, who + " (no heartbeat for " +
                        std::to_string(static_cast<long long>(now - last_heard_[static_cast<size_t>(r)])) + " s)");
      else if (last_step_[static_cast<size_t>(r)] < newest)
        add(lagging, who + " (at step " + std::to_string(static_cast<long long>(last_step_[static_cast<size_t>(r)])) +
                         ")");
    }
    if (!silent.empty())
      msg += silent + " went silent (process stopped or killed, or its node lost). Stopping the job";
    else if (!lagging.empty())
      msg += lagging + " is alive but has not reached this step (stuck outside communication: input, compute, "
                       "or a deadlock). Stopping the job";
    else
      msg += "every rank is alive and at the same step, so the collective itself is stuck (network or MPI "
             "problem). Stopping the job";
  } else {
    msg += "rank 0 on " + hosts_[0] + " went silent (no heartbeat for " +
           std::to_string(static_cast<long long>(now - last_heard_[0])) + " s). Stopping the job";
  }
  say_last_words("stopped by the --collective-timeout watchdog: " + msg);  // rank 0's run record (train/run_end.hpp)
  print_error(msg);
  if (!local_) MPI_Abort(MPI_COMM_WORLD, 3);  // local: MPI is a singleton, if started at all
  std::_Exit(3);
}

}  // namespace cnnscale
