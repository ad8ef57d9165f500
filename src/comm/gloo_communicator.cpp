// gloo_communicator.cpp — see gloo_communicator.hpp.
#include "comm/gloo_communicator.hpp"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "util/bf16.hpp"
#include "util/env.hpp"
#include "util/error.hpp"

namespace cnnscale {
namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

Ms to_ms(double s) { return Ms(static_cast<long>(s * 1000.0)); }
double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Gloo's address lists, compacted for the store (issue 39 item 1). This Gloo (Debian's
// 2022 build) writes under "<rank>" one tcp::Address image per peer: a sockaddr_storage
// of which only the sockaddr_in/in6 part is set (the rest is whatever was on the stack,
// different in every image) and an 8-byte sequence number: 136 bytes per peer, so a
// world's two contexts put 272·W² bytes in the store (4.5 GB at 4096 ranks). Gloo reads
// back only the family, address and port. The adapter stores the images with the unset
// bytes zeroed (no stack contents leave the process), as the first image and, for each
// further one, the bytes where it differs from the first (the port: 2 bytes): 2·W + 149
// bytes a list, ~4·W² bytes in all (measured: tests/comm/test_gloo_store.cpp).
//   'A' count size lo hi (u32 each), image 0, then count-1 × its bytes [lo, hi)
//   'R' and the value as Gloo gave it (the hostname keys, an address list of another layout)
constexpr size_t kAddressImage = sizeof(sockaddr_storage) + 8;
constexpr size_t kPackedHeader = 1 + 4 * 4;

void put_u32(std::string& out, size_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
size_t get_u32(const char* p) {
  size_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<size_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::string pack_value(const std::vector<char>& v, int size) {
  const size_t n = size > 1 ? static_cast<size_t>(size - 1) : 0;
  std::vector<char> img(v);
  bool addresses = n > 0 && v.size() == n * kAddressImage;
  for (size_t i = 0; addresses && i < n; ++i) {
    char* p = img.data() + i * kAddressImage;
    sockaddr_storage ss;
    std::memcpy(&ss, p, sizeof(ss));
    const size_t used = ss.ss_family == AF_INET    ? sizeof(sockaddr_in)
                        : ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                   : 0;
    if (used == 0) addresses = false;
    else std::memset(p + used, 0, sizeof(sockaddr_storage) - used);
  }
  std::string out;
  if (!addresses) {
    out.push_back('R');
    out.append(v.begin(), v.end());
    return out;
  }
  size_t lo = kAddressImage, hi = 0;
  for (size_t i = 1; i < n; ++i)
    for (size_t b = 0; b < kAddressImage; ++b)
      if (img[i * kAddressImage + b] != img[b]) {
        lo = std::min(lo, b);
        hi = std::max(hi, b + 1);
      }
  if (hi < lo) lo = hi = 0;  // one image, or all alike
  out.push_back('A');
  for (size_t x : {n, kAddressImage, lo, hi}) put_u32(out, x);
  out.append(img.data(), kAddressImage);
  for (size_t i = 1; i < n; ++i) out.append(img.data() + i * kAddressImage + lo, hi - lo);
  return out;
}

std::vector<char> unpack_value(const std::string& s, int size, const std::string& key, const RendezvousStore& store) {
  if (!s.empty() && s[0] == 'R') return std::vector<char>(s.begin() + 1, s.end());
  const size_t n = size > 1 ? static_cast<size_t>(size - 1) : 0;
  const bool header = s.size() >= kPackedHeader && s[0] == 'A';
  const size_t count = header ? get_u32(&s[1]) : 0, image = header ? get_u32(&s[5]) : 0;
  const size_t lo = header ? get_u32(&s[9]) : 0, hi = header ? get_u32(&s[13]) : 0;
  if (!header || count != n || n == 0 || image != kAddressImage || lo > hi || hi > image ||
      s.size() != kPackedHeader + image + (count - 1) * (hi - lo))
    fail("the Gloo address list '", key, "' in the rendezvous store at ", store.where(),
         " is malformed: a process that is not one of this job's ranks wrote it (set CNNSCALE_RENDEZVOUS_TOKEN, the "
         "same on every rank), or the ranks run different cnnscale builds");
  std::vector<char> out(count * image);
  const char* first = s.data() + kPackedHeader;
  for (size_t i = 0; i < count; ++i) {
    std::memcpy(out.data() + i * image, first, image);
    if (i > 0) std::memcpy(out.data() + i * image + lo, first + image + (i - 1) * (hi - lo), hi - lo);
  }
  return out;
}

// The cnnscale store as Gloo's rendezvous::Store, keys under a prefix, values packed.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(RendezvousStore& s, std::string prefix, int size, double timeout_s)
      : s_(s), prefix_(std::move(prefix)), size_(size), timeout_(to_ms(timeout_s)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    s_.set(prefix_ + key, pack_value(data, size_));
  }
  std::vector<char> get(const std::string& key) override {
    return unpack_value(s_.get(prefix_ + key, timeout_), size_, prefix_ + key, s_);
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const Ms& timeout) override {
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    auto missing = s_.wait(full, timeout);
    if (!missing.empty()) {
      const std::string refused = s_.refusals();
      fail("the Gloo connection setup waited ", std::chrono::duration<double>(timeout).count(), " s at ", s_.where(),
           " for ", missing.front(),
           ": a rank stopped between the rendezvous and the connection setup (see its output)",
           refused.empty() ? "" : "; " + refused);
    }
  }

 private:
  RendezvousStore& s_;
  std::string prefix_;
  int size_;
  Ms timeout_;
};

void bf16_sum(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<uint16_t*>(c);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = float_to_bf16(bf16_to_float(x[i]) + bf16_to_float(y[i]));
}

gloo::AllreduceOptions::Algorithm algorithm() {
  const auto a = process_env()("CNNSCALE_GLOO_ALGORITHM");
  if (!a || *a == "ring") return gloo::AllreduceOptions::Algorithm::RING;
  if (*a == "bcube") return gloo::AllreduceOptions::Algorithm::BCUBE;
  fail("CNNSCALE_GLOO_ALGORITHM=", *a, " is not a Gloo allreduce algorithm; use ring or bcube");
}

// A Gloo failure as the user's error: which collective, which rank, what to do.
[[noreturn]] void gloo_failed(const std::string& what, int rank, double timeout_s, const std::exception& e) {
  fail("rank ", rank, ": ", what, " over Gloo failed: ", e.what(),
       ". Another rank stopped (see its output: the first error there is the cause) or did not arrive within "
       "--collective-timeout ",
       timeout_s, " s; if every rank is alive and slow, raise --collective-timeout");
}

template <class T>
void reduce_with(gloo::AllreduceOptions& o, ReduceOp op) {
  using F = void (*)(void*, const void*, const void*, size_t);
  switch (op) {
    case ReduceOp::sum: o.setReduceFunction(static_cast<F>(&gloo::sum<T>)); break;
    case ReduceOp::min: o.setReduceFunction(static_cast<F>(&gloo::min<T>)); break;
    case ReduceOp::max: o.setReduceFunction(static_cast<F>(&gloo::max<T>)); break;
  }
}

template <class T>
void typed_allreduce(const std::shared_ptr<gloo::Context>& ctx, void* values, size_t n, ReduceOp op, Ms timeout,
                     uint32_t tag) {
  gloo::AllreduceOptions o(ctx);
  o.setOutput(static_cast<T*>(values), n);
  reduce_with<T>(o, op);
  o.setTag(tag);
  o.setTimeout(timeout);
  gloo::allreduce(o);
}

// ---- data plane ----

struct Flight {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::string error;  // set: the collective failed
  double started = 0, completed = 0;
};

class GlooPending final : public PendingReduce {
 public:
  explicit GlooPending(std::shared_ptr<Flight> f) : f_(std::move(f)) {}
  void wait() override {
    std::unique_lock<std::mutex> lock(f_->mu);
    f_->cv.wait(lock, [&] { return f_->done; });
    if (!f_->error.empty()) throw UserError(f_->error);
  }
  bool times(double* started, double* completed) const override {
    *started = f_->started;
    *completed = f_->completed;
    return true;
  }

 private:
  std::shared_ptr<Flight> f_;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::Context> ctx, double timeout_s)
      : ctx_(std::move(ctx)), timeout_s_(timeout_s), algorithm_(algorithm()) {
    worker_ = std::thread([this] { run(); });
  }
  ~GlooCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  Backend backend() const override { return Backend::gloo; }
  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  bool device_buffers() const override { return false; }

  // Blocking calls run on the calling thread once every earlier collective is done (no
  // hand-over to the worker: on a loaded host each costs a scheduler slice).
  void allreduce_sum(void* buf, size_t count, DType t) override {
    run_now("the allreduce", sum_job(buf, count, t));
  }

  std::unique_ptr<PendingReduce> allreduce_sum_async(void* buf, size_t count, DType t) override {
    return std::make_unique<GlooPending>(submit("the gradient allreduce", sum_job(buf, count, t)));
  }

  void broadcast(void* buf, size_t bytes, int root) override {
    run_now("the parameter broadcast", [this, buf, bytes, root](uint32_t tag) {
      gloo::BroadcastOptions o(ctx_);
      o.setOutput(static_cast<char*>(buf), bytes);
      o.setRoot(root);
      o.setTag(tag);
      o.setTimeout(to_ms(timeout_s_));
      gloo::broadcast(o);
    });
  }

  void barrier() override {
    run_now("a barrier", [this](uint32_t tag) {
      gloo::BarrierOptions o(ctx_);
      o.setTag(tag);
      o.setTimeout(to_ms(timeout_s_));
      gloo::barrier(o);
    });
  }

 private:
  using Fn = std::function<void(uint32_t)>;
  struct Job {
    std::string what;
    Fn fn;
    std::shared_ptr<Flight> flight;
  };

  Fn sum_job(void* buf, size_t count, DType t) {
    return [this, buf, count, t](uint32_t tag) {
      gloo::AllreduceOptions o(ctx_);
      if (t == DType::f32) {
        o.setOutput(static_cast<float*>(buf), count);
        o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      } else {
        o.setOutput(static_cast<uint16_t*>(buf), count);
        o.setReduceFunction(&bf16_sum);
      }
      o.setAlgorithm(algorithm_);
      o.setTag(tag);
      o.setTimeout(to_ms(timeout_s_));
      gloo::allreduce(o);
    };
  }

  std::shared_ptr<Flight> submit(const char* what, Fn fn) {
    auto f = std::make_shared<Flight>();
    f->started = now_s();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({what, std::move(fn), f});
    }
    cv_.notify_all();
    return f;
  }

  void run_now(const char* what, Fn fn) {
    Job job{what, std::move(fn), std::make_shared<Flight>()};
    job.flight->started = now_s();
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return queue_.empty() && !running_; });
      running_ = true;
    }
    execute(job);
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
    }
    cv_.notify_all();
    GlooPending(job.flight).wait();  // throws the failure, if any
  }

  // Runs one collective; only the holder of running_ calls it (tag_, failed_ are its own).
  void execute(Job& job) {
    std::string error = failed_;  // after one failure every later collective fails at once
    if (error.empty()) {
      try {
        job.fn(tag_++);
      } catch (const UserError& e) {
        error = e.what();
      } catch (const std::exception& e) {
        try {
          gloo_failed(job.what, ctx_->rank, timeout_s_, e);
        } catch (const UserError& u) {
          error = u.what();
        }
      }
      failed_ = error;
    }
    {
      std::lock_guard<std::mutex> lock(job.flight->mu);
      job.flight->completed = now_s();
      job.flight->error = error;
      job.flight->done = true;
    }
    job.flight->cv.notify_all();
  }

  void run() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || (!queue_.empty() && !running_); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
      }
      execute(job);
      {
        std::lock_guard<std::mutex> lock(mu_);
        running_ = false;
      }
      cv_.notify_all();
    }
  }

  std::shared_ptr<gloo::Context> ctx_;
  double timeout_s_;
  gloo::AllreduceOptions::Algorithm algorithm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  bool running_ = false;  // a collective is executing (on the worker or a blocking caller)
  uint32_t tag_ = 0;
  std::string failed_;
  std::thread worker_;
};

// ---- control plane ----

class GlooControl final : public ControlTransport {
 public:
  GlooControl(std::shared_ptr<gloo::Context> ctx, double timeout_s) : ctx_(std::move(ctx)), timeout_s_(timeout_s) {}
  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  void set_timeout(double s) override { timeout_s_ = s; }

  void allreduce(void* values, size_t n, char elem, ReduceOp op, const char* what) override {
    if (n == 0) return;
    guard(what, [&] {
      switch (elem) {
        case 'i': typed_allreduce<int32_t>(ctx_, values, n, op, to_ms(timeout_s_), tag_++); break;
        case 'l': typed_allreduce<int64_t>(ctx_, values, n, op, to_ms(timeout_s_), tag_++); break;
        case 'u': typed_allreduce<uint64_t>(ctx_, values, n, op, to_ms(timeout_s_), tag_++); break;
        case 'f': typed_allreduce<float>(ctx_, values, n, op, to_ms(timeout_s_), tag_++); break;
        default: typed_allreduce<double>(ctx_, values, n, op, to_ms(timeout_s_), tag_++); break;
      }
    });
  }
  void allgather(const void* mine, void* all, size_t bytes_each, const char* what) override {
    guard(what, [&] {
      gloo::AllgatherOptions o(ctx_);
      o.setInput(const_cast<char*>(static_cast<const char*>(mine)), bytes_each);
      o.setOutput(static_cast<char*>(all), bytes_each * static_cast<size_t>(ctx_->size));
      o.setTag(tag_++);
      o.setTimeout(to_ms(timeout_s_));
      gloo::allgather(o);
    });
  }
  void broadcast(void* data, size_t bytes, int root, const char* what) override {
    if (bytes == 0) return;
    guard(what, [&] {
      gloo::BroadcastOptions o(ctx_);
      o.setOutput(static_cast<char*>(data), bytes);
      o.setRoot(root);
      o.setTag(tag_++);
      o.setTimeout(to_ms(timeout_s_));
      gloo::broadcast(o);
    });
  }
  void gather(const void* mine, void* all, size_t bytes_each, int root, const char* what) override {
    guard(what, [&] {
      gloo::GatherOptions o(ctx_);
      o.setInput(const_cast<char*>(static_cast<const char*>(mine)), bytes_each);
      if (ctx_->rank == root) o.setOutput(static_cast<char*>(all), bytes_each * static_cast<size_t>(ctx_->size));
      o.setRoot(root);
      o.setTag(tag_++);
      o.setTimeout(to_ms(timeout_s_));
      gloo::gather(o);
    });
  }

 private:
  template <class F>
  void guard(const char* what, F&& f) {
    try {
      f();
    } catch (const UserError&) {
      throw;
    } catch (const std::exception& e) {
      gloo_failed(what, ctx_->rank, timeout_s_, e);
    }
  }

  std::shared_ptr<gloo::Context> ctx_;
  double timeout_s_;
  uint32_t tag_ = 0;
};

}  // namespace

std::shared_ptr<gloo::Context> make_gloo_context(RendezvousStore& store, const std::string& prefix, int rank, int size,
                                                 double timeout_s) {
  gloo::transport::tcp::attr attr;
  // The interface this host reaches the store through, unless GLOO_SOCKET_IFNAME names one (as in PyTorch).
  if (auto iface = process_env()("GLOO_SOCKET_IFNAME")) attr.iface = *iface;
  else attr.hostname = store.local_address();
  std::shared_ptr<gloo::transport::Device> dev;
  try {
    dev = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    fail("rank ", rank, ": Gloo cannot open a TCP device on ",
         attr.iface.empty() ? "address " + attr.hostname : "interface " + attr.iface, ": ", e.what(),
         attr.iface.empty() ? "" : "; check GLOO_SOCKET_IFNAME (`ip -br addr` lists the interfaces)");
  }
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(to_ms(timeout_s));
  StoreAdapter adapter(store, "cnnscale/gloo/" + prefix + "/", size, timeout_s);
  try {
    ctx->connectFullMesh(adapter, dev);
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    fail("rank ", rank, ": Gloo could not connect to every other rank (", e.what(),
         "): a rank stopped, or the ranks cannot reach each other's address (rank ", rank, " offered ",
         attr.iface.empty() ? attr.hostname : attr.iface,
         "; set GLOO_SOCKET_IFNAME to the interface the ranks share, and check firewalls)");
  }
  return ctx;
}

std::unique_ptr<Communicator> make_gloo_communicator(std::shared_ptr<gloo::Context> ctx, double timeout_s) {
  return std::make_unique<GlooCommunicator>(std::move(ctx), timeout_s);
}

std::unique_ptr<ControlTransport> make_gloo_control(std::shared_ptr<gloo::Context> ctx, double timeout_s) {
  return std::make_unique<GlooControl>(std::move(ctx), timeout_s);
}

}  // namespace cnnscale
