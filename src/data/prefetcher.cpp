// prefetcher.cpp — see prefetcher.hpp.
#include "data/prefetcher.hpp"

#include <chrono>

namespace cnnscale {
namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Prefetcher::Prefetcher(Produce produce, int64_t steps_per_epoch, int depth)
    : produce_(std::move(produce)), steps_(steps_per_epoch), depth_(depth < 0 ? 0 : depth) {}

Prefetcher::~Prefetcher() { stop(); }

void Prefetcher::advance(int& epoch, int64_t& step) const {
  if (++step >= steps_) {
    step = 0;
    ++epoch;
  }
}

void Prefetcher::stop() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  space_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lk(m_);
  stop_ = false;
  // Back to the first batch not handed out (the made-ahead ones, and one whose making
  // failed, are made again).
  if (steps_ > 0) {
    const int64_t pos = static_cast<int64_t>(epoch_) * steps_ + step_ - static_cast<int64_t>(ready_.size()) -
                        (error_ ? 1 : 0);
    epoch_ = static_cast<int>(pos / steps_);
    step_ = pos % steps_;
  }
  while (!ready_.empty()) {
    spare_.push_back(std::move(ready_.front()));
    ready_.pop_front();
  }
  error_ = nullptr;
}

void Prefetcher::seek(int epoch, int64_t step) {
  stop();
  std::lock_guard<std::mutex> lk(m_);
  epoch_ = epoch;
  step_ = step;
}

void Prefetcher::set_hook(BatchHook hook) {
  stop();
  std::lock_guard<std::mutex> lk(m_);
  hook_ = std::move(hook);
}

void Prefetcher::make(int epoch, int64_t step, Batch& out, const BatchHook& hook) {
  out.ticket = -1;
  produce_(epoch, step, out);
  if (hook) out.ticket = hook(out);
}

void Prefetcher::run() {
  std::unique_lock<std::mutex> lk(m_);
  while (!stop_) {
    if (error_ || static_cast<int>(ready_.size()) >= depth_) {
      space_cv_.wait(lk);
      continue;
    }
    Batch b;
    if (!spare_.empty()) {
      b = std::move(spare_.back());
      spare_.pop_back();
    }
    const int e = epoch_;
    const int64_t s = step_;
    advance(epoch_, step_);
    const BatchHook hook = hook_;  // a copy: set_hook changes hook_ only with the thread stopped
    lk.unlock();
    std::exception_ptr err;
    try {
      make(e, s, b, hook);
    } catch (...) {
      err = std::current_exception();
    }
    lk.lock();
    if (err) error_ = err;
    else ready_.push_back(std::move(b));
    ready_cv_.notify_one();
  }
}

void Prefetcher::next(Batch& out) {
  const double t0 = now_s();
  if (depth_ == 0) {
    int e = epoch_;
    int64_t s = step_;
    advance(epoch_, step_);
    make(e, s, out, hook_);
    wait_s_ += now_s() - t0;
    return;
  }
  std::unique_lock<std::mutex> lk(m_);
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  ready_cv_.wait(lk, [&] { return !ready_.empty() || error_; });
  wait_s_ += now_s() - t0;
  if (ready_.empty()) std::rethrow_exception(error_);
  spare_.push_back(std::move(out));
  out = std::move(ready_.front());
  ready_.pop_front();
  lk.unlock();
  space_cv_.notify_one();
}

double Prefetcher::take_wait_seconds() {
  std::lock_guard<std::mutex> lk(m_);
  const double w = wait_s_;
  wait_s_ = 0;
  return w;
}

}  // namespace cnnscale
