// prefetcher.hpp — runs a batch producer in a background thread, `depth` batches
// ahead of the consumer, in (epoch, step) order; the engine of every BatchSource.
//
// produce(epoch, step, out) fills `out` (its buffers are recycled, so it should
// resize, not reallocate). depth 0 produces inline inside next() (no thread).
// An exception thrown by produce() is rethrown by the next() that would have
// received that batch. Time next() spends blocked is summed for take_wait_seconds().
// The batch hook (batch_source.hpp) runs right after produce(), in the same thread,
// and sets Batch::ticket (-1 without a hook); an exception from it is produce()'s.
// stop (seek, set_hook, destruction) drops the batches made ahead and moves the
// position back to the first of them, so nothing is skipped.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "data/batch_source.hpp"

namespace cnnscale {

class Prefetcher {
 public:
  using Produce = std::function<void(int epoch, int64_t step, Batch& out)>;
  Prefetcher(Produce produce, int64_t steps_per_epoch, int depth);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  void seek(int epoch, int64_t step);
  void next(Batch& out);
  double take_wait_seconds();
  void set_hook(BatchHook hook);

 private:
  void run();
  void stop();
  void advance(int& epoch, int64_t& step) const;

  void make(int epoch, int64_t step, Batch& out, const BatchHook& hook);

  Produce produce_;
  BatchHook hook_;  // read and written under m_ (the thread is stopped to change it)
  const int64_t steps_;
  const int depth_;
  std::mutex m_;
  std::condition_variable ready_cv_, space_cv_;
  std::deque<Batch> ready_;
  std::vector<Batch> spare_;
  std::exception_ptr error_;
  bool stop_ = false;
  int epoch_ = 0;       // next position the producer makes
  int64_t step_ = 0;
  double wait_s_ = 0;
  std::thread thread_;
};

}  // namespace cnnscale
