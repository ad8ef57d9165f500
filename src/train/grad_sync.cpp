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

GradSync::GradSync(Communicator& comm, float* grads, std::vector<Bucket> buckets, DType wire)
    : comm_(comm), grads_(grads), buckets_(std::move(buckets)), wire_(wire) {
  pending_.reserve(buckets_.size());
}

size_t GradSync::bytes_per_step() const {
  size_t n = 0;
  for (const auto& b : buckets_) n += (b.end - b.begin) * sizeof(float);
  return n;
}

void GradSync::on_ready(size_t ready_end) {
  if (comm_.size() == 1) return;
  while (next_ < buckets_.size() && buckets_[next_].end <= ready_end) {
    const Bucket& b = buckets_[next_++];
    pending_.push_back(comm_.allreduce_sum_async(grads_ + b.begin, b.end - b.begin, wire_));
  }
  comm_.progress();
}

double GradSync::finish() {
  if (comm_.size() == 1) return 0.0;
  on_ready(static_cast<size_t>(-1));
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& p : pending_) p->wait();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  pending_.clear();
  next_ = 0;
  return waited;
}

}  // namespace cnnscale
