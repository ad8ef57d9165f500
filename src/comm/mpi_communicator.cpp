// mpi_communicator.cpp — see mpi_communicator.hpp.
#include "comm/mpi_communicator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>

#include "launch/mpi_check.hpp"
#include "util/bf16.hpp"
#include "util/env.hpp"

namespace cnnscale {
namespace {

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

MPI_Op g_bf16_sum = MPI_OP_NULL;

// Calls f(offset, count) for consecutive pieces of at most `piece` elements: MPI counts
// are int, so a buffer of more than INT_MAX elements (or bytes, for broadcasts) travels
// in several calls. Every rank splits alike, so the calls match.
template <typename F>
void for_each_piece(size_t count, size_t piece, F&& f) {
  for (size_t off = 0; off < count; off += piece) f(off, static_cast<int>(std::min(piece, count - off)));
}

}  // namespace

MPI_Datatype mpi_type(DType t) { return t == DType::f32 ? MPI_FLOAT : MPI_UINT16_T; }

MPI_Op mpi_sum_op(DType t) {
  if (t == DType::f32) return MPI_SUM;
  if (g_bf16_sum == MPI_OP_NULL) mpiCheck(MPI_Op_create(&bf16_sum, /*commute=*/1, &g_bf16_sum));
  return g_bf16_sum;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The progress thread tests a flight's requests under the flight's own mutex (try_lock:
// it never waits for it), never under mu_: a thread descheduled inside an MPI call while
// holding mu_ would stall the training thread's next launch (the cores are shared).
struct MpiCommunicator::Flight {
  std::vector<MPI_Request> reqs;
  std::mutex mu;                     // held while testing reqs and by wait()
  bool waited = false;               // reqs freed by wait(); under mu
  std::atomic<double> completed{0};  // 0 until seen complete
  double started = 0;
  // Tests the requests unless another thread is at it; true once complete.
  bool test() {
    if (completed.load() != 0) return true;
    std::unique_lock<std::mutex> lk(mu, std::try_to_lock);
    if (!lk.owns_lock() || waited) return false;
    bool all = true;
    for (MPI_Request r : reqs) {
      int flag = 0;
      MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE);  // runs the progress engine; frees nothing
      all = all && flag;
    }
    if (all) completed.store(now_s());
    return all;
  }
};

class MpiPendingReduce final : public PendingReduce {
 public:
  MpiPendingReduce(MpiCommunicator* owner, std::shared_ptr<MpiCommunicator::Flight> f)
      : owner_(owner), f_(std::move(f)) {}
  ~MpiPendingReduce() override { wait(); }
  void wait() override {
    if (done_) return;
    {
      std::lock_guard<std::mutex> lk(owner_->mu_);
      auto& v = owner_->in_flight_;
      v.erase(std::remove(v.begin(), v.end(), f_), v.end());
      owner_->active_ = false;  // MPI_Waitall progresses by itself (and the caller waits for the rest next)
    }
    std::lock_guard<std::mutex> lk(f_->mu);  // not while the progress thread tests it
    mpiCheck(MPI_Waitall(static_cast<int>(f_->reqs.size()), f_->reqs.data(), MPI_STATUSES_IGNORE));
    f_->waited = true;
    if (f_->completed.load() == 0) f_->completed.store(now_s());
    done_ = true;
  }
  bool times(double* started, double* completed) const override {
    if (!done_) return false;
    *started = f_->started;
    *completed = f_->completed.load();
    return true;
  }

 private:
  MpiCommunicator* owner_;
  std::shared_ptr<MpiCommunicator::Flight> f_;
  bool done_ = false;
};

MpiCommunicator::MpiCommunicator(MPI_Comm parent, size_t max_piece)
    : max_piece_(std::min<size_t>(std::max<size_t>(max_piece, 1), INT_MAX)) {
  mpiCheck(MPI_Comm_dup(parent, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  const EnvLookup env = process_env();
  long us = 500;
  if (auto v = env("CNNSCALE_PROGRESS_US")) us = parse_env_int("CNNSCALE_PROGRESS_US", *v);
  if (auto v = env("CNNSCALE_PROGRESS_POLLS"))
    progress_polls_ = static_cast<int>(std::max(0L, parse_env_int("CNNSCALE_PROGRESS_POLLS", *v)));
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (us > 0 && size_ > 1 && level == MPI_THREAD_MULTIPLE) progress_us_ = static_cast<int>(std::min(us, 1000000L));
}

MpiCommunicator::~MpiCommunicator() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::wake_progress() {
  if (progress_us_ <= 0) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    active_ = true;
    polls_left_ = progress_polls_;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { progress_loop(); });
  cv_.notify_one();
}

void MpiCommunicator::rest_progress() {
  if (progress_us_ <= 0) return;
  std::lock_guard<std::mutex> lk(mu_);
  polls_left_ = 0;  // sums still in flight keep being polled until wait() takes them
  if (in_flight_.empty()) active_ = false;
}

bool MpiCommunicator::poll_flights(std::unique_lock<std::mutex>& lk) {
  std::vector<std::shared_ptr<Flight>> flights = in_flight_;  // copied under mu_, tested without it
  lk.unlock();
  bool any = false;
  for (auto& f : flights) any = !f->test() || any;
  lk.lock();
  return any;
}

void MpiCommunicator::progress_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  const auto interval = std::chrono::microseconds(progress_us_);
  for (;;) {
    cv_.wait(lk, [this] { return active_ || stop_; });
    if (stop_) return;
    while (active_ && !stop_) {
      // Sums this communicator started: tested (and timed) at every poll.
      const bool pending = poll_flights(lk);
      if (!(pending && progress_polls_ == 0) && polls_left_-- <= 0) {  // this wake had its polls
        active_ = false;
        break;
      }
      lk.unlock();
      if (!pending) {
        int flag = 0;
        // Runs the progress engine (for every communicator of the process: the node-shared
        // reducer's slices between nodes); no message ever carries this tag.
        MPI_Iprobe(MPI_ANY_SOURCE, 0x7ffe, comm_, &flag, MPI_STATUS_IGNORE);
      }
      std::this_thread::sleep_for(interval);
      lk.lock();
    }
  }
}

void MpiCommunicator::allreduce_sum(void* buf, size_t count, DType t) {
  char* p = static_cast<char*>(buf);
  for_each_piece(count, max_piece_, [&](size_t off, int n) {
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, p + off * dtype_size(t), n, mpi_type(t), mpi_sum_op(t), comm_));
  });
}

std::unique_ptr<PendingReduce> MpiCommunicator::allreduce_sum_async(void* buf, size_t count, DType t) {
  char* p = static_cast<char*>(buf);
  auto f = std::make_shared<Flight>();
  f->started = now_s();
  for_each_piece(count, max_piece_, [&](size_t off, int n) {
    MPI_Request req = MPI_REQUEST_NULL;
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, p + off * dtype_size(t), n, mpi_type(t), mpi_sum_op(t), comm_, &req));
    f->reqs.push_back(req);
  });
  {
    std::lock_guard<std::mutex> lk(mu_);
    in_flight_.push_back(f);
  }
  wake_progress();
  return std::make_unique<MpiPendingReduce>(this, std::move(f));
}

void MpiCommunicator::progress() {
  // MPI_Request_get_status: completion is observed (and the request freed) only in wait().
  std::unique_lock<std::mutex> lk(mu_);
  poll_flights(lk);
}

void MpiCommunicator::broadcast(void* buf, size_t bytes, int root) {
  char* p = static_cast<char*>(buf);
  for_each_piece(bytes, max_piece_, [&](size_t off, int n) { mpiCheck(MPI_Bcast(p + off, n, MPI_BYTE, root, comm_)); });
}

void MpiCommunicator::barrier() { mpiCheck(MPI_Barrier(comm_)); }

}  // namespace cnnscale
