// worker_pool.hpp — `train --data-threads N`: N−1 persistent helper threads plus the
// calling thread run the per-sample work of a batch (augment + normalise) in parallel.
// run(n, f) calls f(i, t) for every i in [0, n) exactly once, sample i on thread
// t = i mod N (static striding: which thread does a sample never changes what it
// computes, since every draw is keyed by (seed, epoch, sample id) — see augment.hpp),
// and returns when all are done; an exception from f is rethrown by run() (the
// lowest-numbered failing thread's). With N = 1 it is a plain loop on the caller.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cnnscale {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  int threads() const { return threads_; }
  void run(int64_t n, const std::function<void(int64_t i, int t)>& f);

 private:
  void work(int t);
  const int threads_;
  std::mutex m_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int)>* job_ = nullptr;
  int64_t n_ = 0;
  uint64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> pool_;
};

}  // namespace cnnscale
