// grad_sync.cpp — see grad_sync.hpp.
#include "train/grad_sync.hpp"

#include <chrono>

namespace cnnscale {

std::vector<Bucket> plan_buckets(const std::vector<size_t>& param_ends, size_t first_bucket_bytes,
                                 size_t bucket_bytes) {
  std::vector<Bucket> out;
  size_t begin = 0;
  for (size_t end : param_ends) {
    const size_t cap = out.empty() ? first_bucket_bytes : bucket_bytes;
    if (end > begin && (end - begin) * sizeof(float) >= cap) {
      out.push_back({begin, end});
      begin = end;
    }
  }
  if (!param_ends.empty() && param_ends.back() > begin) out.push_back({begin, param_ends.back()});
  return out;
}

GradSync::GradSync(std::vector<Bucket> buckets, std::unique_ptr<BucketReducer> reducer)
    : buckets_(std::move(buckets)), reducer_(std::move(reducer)) {}

GradSync::GradSync(Communicator& comm, float* grads, std::vector<Bucket> buckets)
    : buckets_(std::move(buckets)) {
  if (comm.size() > 1) reducer_ = make_allreduce_reducer(comm, grads, buckets_);
}

std::string GradSync::method() const { return reducer_ ? reducer_->method() : "none (one rank)"; }

size_t GradSync::bytes_per_step() const {
  size_t n = 0;
  for (const auto& b : buckets_) n += (b.end - b.begin) * sizeof(float);
  return n;
}

void GradSync::on_ready(size_t ready_end) {
  if (!reducer_) return;
  while (next_ < buckets_.size() && buckets_[next_].end <= ready_end) reducer_->ready(next_++);
  reducer_->progress();
}

double GradSync::finish() { return close_round(&BucketReducer::finish); }

double GradSync::end_round() { return close_round(&BucketReducer::end_round); }

double GradSync::close_round(void (BucketReducer::*end)()) {
  if (!reducer_) return 0.0;
  on_ready(static_cast<size_t>(-1));
  const auto t0 = std::chrono::steady_clock::now();
  ((*reducer_).*end)();
  next_ = 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double GradSync::complete() {
  if (!reducer_) return 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  reducer_->complete();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace cnnscale
