// staged_communicator.cpp — see staged_communicator.hpp.
#include "comm/staged_communicator.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

namespace cnnscale {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

class StagedCommunicator;

// One sum: its device buffer's copy enqueued to the host at the start; the host sum and
// the copy back in wait().
class StagedPending final : public PendingReduce {
 public:
  StagedPending(StagedCommunicator& c, void* dev, void* host, size_t count, DType t,
                std::unique_ptr<DeviceCopier::Mark> copied)
      : c_(c), dev_(dev), host_(host), count_(count), t_(t), copied_(std::move(copied)) {}
  void wait() override;
  bool times(double* started, double* completed) const override {
    if (!done_) return false;
    *started = started_, *completed = completed_;
    return true;
  }

 private:
  StagedCommunicator& c_;
  void* dev_;
  void* host_;
  size_t count_;
  DType t_;
  std::unique_ptr<DeviceCopier::Mark> copied_;
  bool done_ = false;
  double started_ = 0, completed_ = 0;
};

class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> host, std::unique_ptr<DeviceCopier> copier)
      : host_(std::move(host)), copier_(std::move(copier)) {
    if (host_->device_buffers()) throw std::logic_error("staged communicator over a device communicator");
  }
  ~StagedCommunicator() override {
    // No check here: a destructor must not end the job. Staging buffers outlive every
    // copy into or out of them.
    copier_->quiesce();
    for (auto& [dev, buf] : staging_) copier_->free_host(buf.p);
    if (ranges_.p) copier_->free_host(ranges_.p);
  }

  Backend backend() const override { return host_->backend(); }
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  bool device_buffers() const override { return true; }
  void* stream() const override { return copier_->stream(); }
  bool sums_on_stream() const override { return false; }

  std::unique_ptr<PendingReduce> allreduce_sum_async(void* buf, size_t count, DType t) override {
    const size_t bytes = count * dtype_size(t);
    void* h = staging(buf, bytes);
    copier_->to_host(h, buf, bytes);
    return std::make_unique<StagedPending>(*this, buf, h, count, t, copier_->mark());
  }
  void allreduce_sum(void* buf, size_t count, DType t) override { allreduce_sum_async(buf, count, t)->wait(); }

  // A transient staging buffer, freed once its copy back is done (the parameter broadcast:
  // once per run, the whole model).
  void broadcast(void* buf, size_t bytes, int root) override {
    void* h = copier_->alloc_host(bytes == 0 ? 1 : bytes);
    try {
      if (rank() == root) copier_->to_host(h, buf, bytes);
      copier_->mark()->wait();
      host_->broadcast(h, bytes, root);
      if (rank() != root) copier_->to_device(buf, h, bytes);
      copier_->mark()->wait();
    } catch (...) {
      copier_->quiesce();
      copier_->free_host(h);
      throw;
    }
    copier_->free_host(h);
  }

  // The ranges packed into one host message (one broadcast), as the host transports do.
  void broadcast_ranges(void* base, const std::vector<std::pair<size_t, size_t>>& float_ranges, int root) override {
    size_t total = 0;
    for (auto [b, e] : float_ranges) total += e - b;
    if (total == 0) return;
    float* f = static_cast<float*>(base);
    // Its own staging buffer (the batch-norm buffers: the same ranges every step), grown
    // only when a call needs more.
    if (ranges_.bytes < total * sizeof(float)) {
      copier_->mark()->wait();  // no copy of the old one in flight
      if (ranges_.p) copier_->free_host(ranges_.p);
      ranges_ = {copier_->alloc_host(total * sizeof(float)), total * sizeof(float)};
    }
    auto* packed = static_cast<float*>(ranges_.p);
    if (rank() == root) {
      size_t off = 0;
      for (auto [b, e] : float_ranges) copier_->to_host(packed + off, f + b, (e - b) * sizeof(float)), off += e - b;
    }
    copier_->mark()->wait();  // root: the ranges are here; others: the last call's copies back are done
    host_->broadcast(packed, total * sizeof(float), root);
    if (rank() == root) return;
    size_t off = 0;
    for (auto [b, e] : float_ranges) copier_->to_device(f + b, packed + off, (e - b) * sizeof(float)), off += e - b;
  }

  void barrier() override { host_->barrier(); }
  void progress() override { host_->progress(); }
  void synchronize() override { copier_->synchronize(); }
  void abort() override { host_->abort(); }

  DeviceCopier& copier() { return *copier_; }
  Communicator& host() { return *host_; }

 private:
  // The pinned host buffer of a sum's device buffer, made on first use and kept (a step's
  // buckets are the same every step); replaced when the same device buffer comes with
  // another size (the allreduce benchmark's sweep), after the queue has passed every copy
  // of the old one. Reuse is safe in queue order: a buffer's copy back is enqueued before
  // the next copy into it, and the host writes it (the sum) only after that copy's mark.
  struct HostBuf {
    void* p = nullptr;
    size_t bytes = 0;
  };
  void* staging(const void* dev, size_t bytes) {
    HostBuf& b = staging_[dev];
    if (b.p && b.bytes == bytes) return b.p;
    if (b.p) {
      copier_->mark()->wait();
      copier_->free_host(b.p);
    }
    b = {copier_->alloc_host(bytes == 0 ? 1 : bytes), bytes};
    return b.p;
  }

  std::unique_ptr<Communicator> host_;
  std::unique_ptr<DeviceCopier> copier_;
  std::map<const void*, HostBuf> staging_;  // per sum's device buffer
  HostBuf ranges_;                          // broadcast_ranges' packed message
};

void StagedPending::wait() {
  if (done_) return;
  copied_->wait();  // the bucket is in host memory
  started_ = now_s();
  c_.host().allreduce_sum(host_, count_, t_);
  completed_ = now_s();
  c_.copier().to_device(dev_, host_, count_ * dtype_size(t_));
  done_ = true;
}

// memcpy as the device side: at once, or deferred to the waits (see the header).
class HostCopier final : public DeviceCopier {
 public:
  explicit HostCopier(bool deferred) : deferred_(deferred) {}
  void* stream() const override { return const_cast<HostCopier*>(this); }
  void* alloc_host(size_t bytes) override {
    void* p = std::malloc(bytes);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0xff, bytes);  // NaN floats: a read before the copy shows
    return p;
  }
  void free_host(void* p) override { std::free(p); }
  void to_host(void* host, const void* device, size_t bytes) override { enqueue(host, device, bytes); }
  void to_device(void* device, const void* host, size_t bytes) override { enqueue(device, host, bytes); }
  std::unique_ptr<Mark> mark() override {
    class Upto final : public Mark {
     public:
      Upto(HostCopier& c, size_t n) : c_(c), n_(n) {}
      void wait() override { c_.run(n_); }

     private:
      HostCopier& c_;
      size_t n_;
    };
    return std::make_unique<Upto>(*this, done_ + queue_.size());
  }
  void synchronize() override { run(done_ + queue_.size()); }
  void quiesce() noexcept override { run(done_ + queue_.size()); }

 private:
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  void enqueue(void* dst, const void* src, size_t bytes) {
    if (!deferred_) return static_cast<void>(std::memmove(dst, src, bytes));
    queue_.push_back({dst, src, bytes});
  }
  void run(size_t upto) noexcept {  // the copies up to the upto-th ever enqueued, in order
    size_t i = 0;
    for (; i < queue_.size() && done_ + i < upto; ++i) std::memmove(queue_[i].dst, queue_[i].src, queue_[i].bytes);
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(i));
    done_ += i;
  }
  bool deferred_;
  std::vector<Copy> queue_;
  size_t done_ = 0;  // copies run so far
};

}  // namespace

std::unique_ptr<Communicator> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                       std::unique_ptr<DeviceCopier> copier) {
  return std::make_unique<StagedCommunicator>(std::move(host), std::move(copier));
}

std::unique_ptr<DeviceCopier> make_host_copier(bool deferred) { return std::make_unique<HostCopier>(deferred); }

}  // namespace cnnscale
