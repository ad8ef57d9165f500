// worker_pool.cpp — see worker_pool.hpp.
#include "data/worker_pool.hpp"

#include "util/error.hpp"

namespace cnnscale {

WorkerPool::WorkerPool(int threads) : threads_(threads), errors_(static_cast<size_t>(threads > 0 ? threads : 1)) {
  if (threads < 1) fail("--data-threads ", threads, " is not a thread count: give at least 1 (the reader thread)");
  for (int t = 1; t < threads_; ++t) pool_.emplace_back([this, t] { work(t); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& th : pool_) th.join();
}

void WorkerPool::run(int64_t n, const std::function<void(int64_t, int)>& f) {
  if (threads_ == 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m_);
    job_ = &f;
    n_ = n;
    running_ = threads_ - 1;
    ++generation_;
    for (auto& e : errors_) e = nullptr;
  }
  start_cv_.notify_all();
  try {
    for (int64_t i = 0; i < n; i += threads_) f(i, 0);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(m_);
  done_cv_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
  for (auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

void WorkerPool::work(int t) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int64_t, int)>* job;
    int64_t n;
    {
      std::unique_lock<std::mutex> lock(m_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = n_;
    }
    try {
      for (int64_t i = t; i < n; i += threads_) (*job)(i, t);
    } catch (...) {
      errors_[static_cast<size_t>(t)] = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(m_);
      --running_;
    }
    done_cv_.notify_one();
  }
}

}  // namespace cnnscale
