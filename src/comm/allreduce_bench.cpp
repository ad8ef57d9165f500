// allreduce_bench.cpp — see allreduce_bench.hpp.
#include "comm/allreduce_bench.hpp"

#include <mpi.h>

#include <cctype>
#include <cstring>

#include "comm/allreduce_check.hpp"
#include "comm/nccl.hpp"
#include "launch/mpi_check.hpp"
#include "util/error.hpp"
#include "util/memory.hpp"

namespace cnnscale {
namespace {

// Holds the benchmark buffer on the host or, for device communicators, the GPU.
class BenchBuffer {
 public:
  BenchBuffer(bool device, size_t bytes) : device_(device), bytes_(bytes), host_(bytes) {
    if (device_) dev_ = device_alloc(bytes_);
  }
  ~BenchBuffer() { device_free(dev_); }
  BenchBuffer(const BenchBuffer&) = delete;
  BenchBuffer& operator=(const BenchBuffer&) = delete;
  void* data() { return device_ ? dev_ : host_.data(); }
  std::vector<char>& host() { return host_; }
  void upload() {
    if (device_) copy_to_device(dev_, host_.data(), bytes_);
  }
  void download() {
    if (device_) copy_to_host(host_.data(), dev_, bytes_);
  }

 private:
  bool device_;
  size_t bytes_;
  std::vector<char> host_;
  void* dev_ = nullptr;
};

}  // namespace

double bus_factor(int world) { return world > 0 ? 2.0 * (world - 1) / world : 0.0; }

std::vector<size_t> sweep_sizes(const AllreduceBenchOptions& o) {
  const size_t es = dtype_size(o.dtype);
  std::vector<size_t> out;
  double s = static_cast<double>(o.min_bytes);
  while (s <= static_cast<double>(o.max_bytes) + 0.5) {
    size_t b = static_cast<size_t>(s) / es * es;
    if (b < es) b = es;
    if (out.empty() || out.back() != b) out.push_back(b);
    if (o.factor <= 1.0) break;
    s *= o.factor;
  }
  return out;
}

size_t parse_size(const std::string& option, const std::string& text) {
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  if (pos == 0) fail(option, " ", text, " is not a size; write e.g. 8, 64K, 128M or 1G");
  double v = std::stod(text.substr(0, pos));
  std::string suf = text.substr(pos);
  for (auto& c : suf) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suf == "" || suf == "B") {
  } else if (suf == "K" || suf == "KB" || suf == "KIB") v *= 1024;
  else if (suf == "M" || suf == "MB" || suf == "MIB") v *= 1024.0 * 1024;
  else if (suf == "G" || suf == "GB" || suf == "GIB") v *= 1024.0 * 1024 * 1024;
  else fail(option, " ", text, ": unknown unit '", suf, "'; use K, M or G");
  return static_cast<size_t>(v);
}

AllreduceResult run_allreduce_size(Communicator& comm, size_t bytes, const AllreduceBenchOptions& o,
                                   ControlComm* control) {
  AllreduceResult r;
  r.bytes = bytes;
  r.count = bytes / dtype_size(o.dtype);
  BenchBuffer buf = allocating("allocating the " + std::to_string(bytes) + "-byte allreduce buffer", bytes,
                               "lower -e/--maxbytes, or run with more memory per rank",
                               [&] { return BenchBuffer(comm.device_buffers(), bytes); });
  // Timing runs on zeros: in-place sums of zeros stay zero (no overflow, no denormals).
  std::memset(buf.host().data(), 0, bytes);
  buf.upload();
  // The data plane's waits under the --collective-timeout watchdog, as in training (issue
  // 28 item 4): a rank that stops or hangs ends the benchmark with a message naming it.
  const auto watched = [&](const char* what, auto&& f) {
    if (!control) return f();
    auto waiting = control->waiting(what);
    return f();
  };
  // Each call watched on its own: a sweep may rightly take longer than the timeout.
  const auto sum = [&] { watched("the allreduce benchmark's sums", [&] { comm.allreduce_sum(buf.data(), r.count, o.dtype); }); };
  for (int i = 0; i < o.warmup; ++i) sum();
  watched("the allreduce benchmark's barrier", [&] { comm.barrier(); });
  const double t0 = MPI_Wtime();
  for (int i = 0; i < o.iters; ++i) sum();
  watched("the allreduce benchmark's sums", [&] { comm.synchronize(); });
  double mine = (MPI_Wtime() - t0) / (o.iters > 0 ? o.iters : 1), worst = 0;
  if (control) worst = control->allreduce(mine, ReduceOp::max, "the allreduce benchmark's timing");
  else mpiCheck(MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  r.time_us = worst * 1e6;
  r.algbw_gbs = worst > 0 ? static_cast<double>(bytes) / worst / 1e9 : 0;
  r.busbw_gbs = r.algbw_gbs * bus_factor(comm.size());
  if (o.check) {
    fill_pattern(buf.host().data(), r.count, o.dtype, comm.rank());
    buf.upload();
    watched("the allreduce benchmark's checked sum", [&] {
      comm.allreduce_sum(buf.data(), r.count, o.dtype);
      comm.synchronize();  // a device sum runs on the communicator's stream; the copy is not ordered after it
    });
    buf.download();
    long mine_wrong = static_cast<long>(count_wrong(buf.host().data(), r.count, o.dtype, comm.size()));
    if (control)
      r.wrong = static_cast<long>(
          control->allreduce(static_cast<int64_t>(mine_wrong), ReduceOp::sum, "the allreduce benchmark's check"));
    else mpiCheck(MPI_Allreduce(&mine_wrong, &r.wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
  }
  return r;
}

}  // namespace cnnscale
