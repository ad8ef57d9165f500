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
    // No check here: a destructor must not abort the job (the copier's own destructor
    // releases its queue). Staging buffers outlive every copy into or out of them.
    try {
      copier_->synchronize();
    } catch (...) {
    }
    for (auto& [key, p] : staging_) copier_->free_host(p);
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

  void broadcast(void* buf, size_t bytes, int root) override {
    void* h = staging(buf, bytes);
    if (rank() == root) {
      copier_->to_host(h, buf, bytes);
      copier_->mark()->wait();
    }
    host_->broadcast(h, bytes, root);
    if (rank() != root) copier_->to_device(buf, h, bytes);
  }

  // The ranges packed into one host message (one broadcast), as the host transports do.
  void broadcast_ranges(void* base, const std::vector<std::pair<size_t, size_t>>& float_ranges, int root) override {
    size_t total = 0;
    for (auto [b, e] : float_ranges) total += e - b;
    if (total == 0) return;
    float* f = static_cast<float*>(base);
    // Keyed by the end of the buffer (not its start, which a whole-buffer broadcast of
    // the same base may use with another size).
    auto* packed = static_cast<float*>(staging(f + float_ranges.back().second, total * sizeof(float)));
    if (rank() == root) {
      size_t off = 0;
      for (auto [b, e] : float_ranges) copier_->to_host(packed + off, f + b, (e - b) * sizeof(float)), off += e - b;
      copier_->mark()->wait();
    }
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
  // The pinned host buffer of (device buffer, bytes), made on first use and kept: a
  // step's buckets are the same every step. Reuse is safe in queue order: a buffer's
  // copy back is enqueued before the next copy into it.
  void* staging(const void* dev, size_t bytes) {
    auto key = std::make_pair(dev, bytes);
    auto it = staging_.find(key);
    if (it != staging_.end()) return it->second;
    void* p = copier_->alloc_host(bytes == 0 ? 1 : bytes);
    staging_.emplace(key, p);
    return p;
  }

  std::unique_ptr<Communicator> host_;
  std::unique_ptr<DeviceCopier> copier_;
  std::map<std::pair<const void*, size_t>, void*> staging_;
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

class HostCopier final : public DeviceCopier {
 public:
  void* stream() const override { return const_cast<HostCopier*>(this); }
  void* alloc_host(size_t bytes) override {
    void* p = std::malloc(bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void free_host(void* p) override { std::free(p); }
  void to_host(void* host, const void* device, size_t bytes) override { std::memmove(host, device, bytes); }
  void to_device(void* device, const void* host, size_t bytes) override { std::memmove(device, host, bytes); }
  std::unique_ptr<Mark> mark() override {
    struct Done final : Mark {
      void wait() override {}
    };
    return std::make_unique<Done>();
  }
  void synchronize() override {}
};

}  // namespace

std::unique_ptr<Communicator> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                       std::unique_ptr<DeviceCopier> copier) {
  return std::make_unique<StagedCommunicator>(std::move(host), std::move(copier));
}

std::unique_ptr<DeviceCopier> make_host_copier() { return std::make_unique<HostCopier>(); }

}  // namespace cnnscale
