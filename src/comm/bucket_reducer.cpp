// bucket_reducer.cpp — see bucket_reducer.hpp.
#include "comm/bucket_reducer.hpp"

#include <algorithm>
#include <chrono>

#include "comm/mpi_communicator.hpp"
#include "comm/shm_allreduce.hpp"
#include "launch/mpi_check.hpp"
#include "util/env.hpp"

namespace cnnscale {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

class AllreduceReducer final : public BucketReducer {
 public:
  AllreduceReducer(Communicator& comm, float* buffer, std::vector<Bucket> buckets)
      : comm_(comm), buffer_(buffer), buckets_(std::move(buckets)) {
    pending_.reserve(buckets_.size());
    in_flight_.reserve(buckets_.size());
    spans_.resize(buckets_.size());
    launched_.resize(buckets_.size());
    in_flight_launched_.resize(buckets_.size());
  }
  void ready(size_t i) override {
    const Bucket& b = buckets_[i];
    launched_[i] = now_s();
    pending_.push_back(comm_.allreduce_sum_async(buffer_ + b.begin, b.end - b.begin, DType::f32));
  }
  void progress() override { comm_.progress(); }
  void finish() override {
    complete();  // an older round that end_round() left in flight
    settle(pending_, launched_);
  }
  bool device_ordered() const override { return comm_.device_buffers() && comm_.sums_on_stream(); }
  void end_round() override {
    if (!device_ordered()) return finish();
    complete();
    in_flight_.swap(pending_);  // pending_ is now empty (complete() cleared in_flight_)
    in_flight_launched_.swap(launched_);
  }
  void complete() override {
    if (!in_flight_.empty()) settle(in_flight_, in_flight_launched_);
  }
  std::string method() const override {
    switch (comm_.backend()) {
      case Backend::nccl: return "NCCL";
      case Backend::gloo: return "Gloo";
      default: return "MPI";
    }
  }
  double last_comm_seconds() const override { return comm_s_; }

 private:
  Communicator& comm_;
  float* buffer_;
  std::vector<Bucket> buckets_;
  // Waits for a round's sums, in bucket order, and records its spans and time.
  void settle(std::vector<std::unique_ptr<PendingReduce>>& round, const std::vector<double>& launched) {
    double first = 0, last = 0;
    bool known = !round.empty();
    for (size_t i = 0; i < round.size(); ++i) {
      auto& p = round[i];
      p->wait();
      double s = 0, c = 0;
      if (!p->times(&s, &c)) {
        known = false;
        if (i < spans_.size()) spans_[i] = {launched[i], now_s()};
        continue;
      }
      if (i < spans_.size()) spans_[i] = {s, c};
      first = first == 0 ? s : std::min(first, s);
      last = std::max(last, c);
    }
    comm_s_ = known ? last - first : -1;
    round.clear();
  }

  std::vector<std::unique_ptr<PendingReduce>> pending_;  // this round's sums, in bucket order
  std::vector<double> launched_;  // per bucket: when ready() launched its sum
  // The round end_round() left in flight (device-ordered only), until complete().
  std::vector<std::unique_ptr<PendingReduce>> in_flight_;
  std::vector<double> in_flight_launched_;
  double comm_s_ = -1;
};

class ShmReducer final : public NodeSharedReducer {
 public:
  ShmReducer(std::unique_ptr<ShmAllreduce> shm, MpiCommunicator& comm, size_t buckets)
      : shm_(std::move(shm)), comm_(comm) {
    spans_.resize(buckets);
  }
  float* buffer() const override { return shm_->buffer(); }
  void ready(size_t i) override {
    const double t = now_s();
    if (i == 0) first_ = t;
    if (i < spans_.size()) spans_[i] = {t, 0};
    shm_->ready(i);
    stamp_reduced();
    // Slices go between nodes through MPI: they need progress while backward runs.
    if (shm_->nodes() > 1) comm_.wake_progress();
  }
  void progress() override {
    shm_->progress();
    stamp_reduced();
  }
  void finish() override {
    comm_.rest_progress();  // finish() makes its own progress
    stamp_reduced();
    shm_->finish();
    const double t = now_s();
    for (; stamped_ < spans_.size(); ++stamped_) spans_[stamped_].summed = t;
    stamped_ = 0;
    comm_s_ = t - first_;
  }
  double last_comm_seconds() const override { return comm_s_; }
  std::string method() const override {
    return "node shared memory (" + std::to_string(shm_->local_size()) + " ranks/node)" +
           (shm_->nodes() > 1 ? " + MPI across " + std::to_string(shm_->nodes()) + " nodes" : "");
  }

 private:
  // Marks the segments whose slice this rank has summed since the last call.
  void stamp_reduced() {
    const size_t n = std::min(shm_->segments_reduced(), spans_.size());
    if (stamped_ >= n) return;
    const double t = now_s();
    for (; stamped_ < n; ++stamped_) spans_[stamped_].summed = t;
  }

  std::unique_ptr<ShmAllreduce> shm_;
  MpiCommunicator& comm_;
  double first_ = 0, comm_s_ = -1;
  size_t stamped_ = 0;  // segments of this round with their summed time
};

}  // namespace

std::unique_ptr<BucketReducer> make_allreduce_reducer(Communicator& comm, float* buffer, std::vector<Bucket> buckets) {
  return std::make_unique<AllreduceReducer>(comm, buffer, std::move(buckets));
}

std::unique_ptr<NodeSharedReducer> make_node_shared_reducer(Communicator& comm, size_t count,
                                                            const std::vector<Bucket>& buckets, std::string* why) {
  auto no = [&](const std::string& s) -> std::unique_ptr<NodeSharedReducer> {
    if (why) *why = s;
    return nullptr;
  };
  if (comm.size() < 2) return no("one rank");
  auto* mpi = dynamic_cast<MpiCommunicator*>(&comm);
  if (!mpi) return no(std::string("backend ") + backend_name(comm.backend()));
  // Every rank must take the same branch (create() is collective), and mpirun does not
  // pass a variable to other nodes without -x: agree on the setting first.
  const auto setting = process_env()("CNNSCALE_SHM_ALLREDUCE");
  int on = setting && *setting == "0" ? 0 : 1, all_on = 1;
  mpiCheck(MPI_Allreduce(&on, &all_on, 1, MPI_INT, MPI_MIN, mpi->comm()));
  if (!all_on) return no("CNNSCALE_SHM_ALLREDUCE=0 on some rank");
  std::vector<std::pair<size_t, size_t>> segs;
  for (const auto& b : buckets) segs.emplace_back(b.begin, b.end);
  auto shm = ShmAllreduce::create(mpi->comm(), count, std::move(segs), why);
  if (!shm) return nullptr;
  return std::make_unique<ShmReducer>(std::move(shm), *mpi, buckets.size());
}

}  // namespace cnnscale
