// grad_sync.cpp — see grad_sync.hpp.
#include "train/grad_sync.hpp"

#include <mpi.h>

#include "launch/mpi_check.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

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

std::unique_ptr<ShmAllreduce> make_shm_allreduce(Communicator& comm, size_t count, const std::vector<Bucket>& buckets,
                                                 std::string* why) {
  auto no = [&](const std::string& s) -> std::unique_ptr<ShmAllreduce> {
    if (why) *why = s;
    return nullptr;
  };
  if (comm.size() < 2) return no("one rank");
  if (comm.backend() != "mpi" || comm.device_buffers()) return no("backend " + comm.backend());
  // Every rank must take the same branch (create() is collective), and mpirun does not
  // pass a variable to other nodes without -x: agree on the setting first.
  const char* e = std::getenv("CNNSCALE_SHM_ALLREDUCE");
  int on = e && std::string(e) == "0" ? 0 : 1, all_on = 1;
  mpiCheck(MPI_Allreduce(&on, &all_on, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (!all_on) return no("CNNSCALE_SHM_ALLREDUCE=0 on some rank");
  std::vector<std::pair<size_t, size_t>> segs;
  for (const auto& b : buckets) segs.emplace_back(b.begin, b.end);
  return ShmAllreduce::create(MPI_COMM_WORLD, count, std::move(segs), why);
}

std::string GradSync::method() const {
  if (comm_.size() < 2) return "none (one rank)";
  if (!shm_) return comm_.backend() == "nccl" ? "NCCL" : "MPI";
  return "node shared memory (" + std::to_string(shm_->local_size()) + " ranks/node)" +
         (shm_->nodes() > 1 ? " + MPI across " + std::to_string(shm_->nodes()) + " nodes" : "");
}

GradSync::GradSync(Communicator& comm, float* grads, std::vector<Bucket> buckets, DType wire, ShmAllreduce* shm)
    : comm_(comm), grads_(grads), buckets_(std::move(buckets)), wire_(wire), shm_(shm) {
  if (shm_ && (shm_->buffer() != grads_ || wire_ != DType::f32)) shm_ = nullptr;
  pending_.reserve(buckets_.size());
  int us = 500;
  if (const char* e = std::getenv("CNNSCALE_PROGRESS_US")) us = std::atoi(e);
  if (const char* e = std::getenv("CNNSCALE_PROGRESS_POLLS")) progress_polls_ = std::max(1, std::atoi(e));
  int level = MPI_THREAD_SINGLE, inited = 0;
  MPI_Initialized(&inited);
  if (inited) MPI_Query_thread(&level);
  // With node-shared memory, MPI carries only the slices between nodes: the thread is
  // needed only when there is more than one node.
  const bool mpi_in_flight = !shm_ || shm_->nodes() > 1;
  if (mpi_in_flight && us > 0 && comm_.size() > 1 && comm_.backend() == "mpi" && level == MPI_THREAD_MULTIPLE) {
    progress_us_ = us;
    thread_ = std::thread([this] { progress_loop(); });
  }
}

GradSync::~GradSync() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
}

void GradSync::progress_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  const auto interval = std::chrono::microseconds(progress_us_);
  for (;;) {
    cv_.wait(lk, [this] { return active_ || stop_; });
    if (stop_) return;
    while (active_ && !stop_) {
      if (polls_left_-- <= 0) {  // the bucket had its share of progress calls
        active_ = false;
        break;
      }
      lk.unlock();
      int flag = 0;
      // Runs the progress engine; no message ever carries this tag.
      MPI_Iprobe(MPI_ANY_SOURCE, 0x7ffe, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      std::this_thread::sleep_for(interval);
      lk.lock();
    }
  }
}

size_t GradSync::bytes_per_step() const {
  size_t n = 0;
  for (const auto& b : buckets_) n += (b.end - b.begin) * sizeof(float);
  return n;
}

void GradSync::wake_progress() {
  if (progress_us_ <= 0) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    active_ = true;
    polls_left_ = progress_polls_;
  }
  cv_.notify_one();
}

void GradSync::on_ready(size_t ready_end) {
  if (comm_.size() == 1) return;
  if (shm_) {
    while (next_ < buckets_.size() && buckets_[next_].end <= ready_end) {
      shm_->ready(next_++);
      wake_progress();  // slices may be in flight between nodes
    }
    shm_->progress();
    return;
  }
  while (next_ < buckets_.size() && buckets_[next_].end <= ready_end) {
    const Bucket& b = buckets_[next_++];
    pending_.push_back(comm_.allreduce_sum_async(grads_ + b.begin, b.end - b.begin, wire_));
    wake_progress();
  }
  comm_.progress();
}

double GradSync::finish() {
  if (comm_.size() == 1) return 0.0;
  on_ready(static_cast<size_t>(-1));
  if (progress_us_ > 0) {  // MPI_Wait below progresses by itself
    std::lock_guard<std::mutex> lk(mu_);
    active_ = false;
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (shm_) shm_->finish();
  for (auto& p : pending_) p->wait();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  pending_.clear();
  next_ = 0;
  return waited;
}

}  // namespace cnnscale
