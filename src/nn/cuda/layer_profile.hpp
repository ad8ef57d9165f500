// layer_profile.hpp — where a GPU training step's device time goes, layer by layer
// (CNNSCALE_GPU_PROFILE=FILE, a diagnostic: docs/gpu.md "Where the time goes"). CUDA
// events on the model's stream between consecutive layer calls of forward_backward
// (forward, backward_params, backward_data, and the loss between forward and backward):
// the time between two events is everything that call enqueued (the bf16 conversions
// of a convolution included). A step's events are read at the start of the next step,
// after a stream synchronisation (so a profiled run pipelines a little less than an
// unprofiled one); the first two steps (algorithm warm-up) are left out. At the model's
// end FILE gets one line per (layer, direction) with its mean ms per step and share,
// largest first, after a summary per operation and direction. FILE is written whole, by
// util/atomic_file.hpp's rule (a symbolic link written through; a directory, device or
// FIFO refused with a warning: this runs in the model's destructor).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "nn/graph.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace cnnscale::nn::cuda {

class LayerProfile {
 public:
  enum Dir { kForward = 0, kBackwardParams = 1, kBackwardData = 2, kLoss = 3 };

  explicit LayerProfile(std::string path) : path_(std::move(path)) {}
  LayerProfile(const LayerProfile&) = delete;
  LayerProfile& operator=(const LayerProfile&) = delete;
  ~LayerProfile() {
    for (cudaEvent_t e : ev_) cudaEventDestroy(e);
  }

  // Before the first call of a step: reads the previous step's events (waits for them).
  void begin_step(cudaStream_t s) {
    collect(s);
    used_ = 0;
    slots_.clear();
  }
  // Before each layer call (node index, direction), on the model's stream.
  void mark(cudaStream_t s, int node, Dir d) {
    record(s);
    slots_.emplace_back(node, d);
  }
  // After the last call of the step.
  void end_step(cudaStream_t s) {
    record(s);
    open_ = true;
  }

  // Writes the table (model description, batch size) and stops; called once.
  void write(cudaStream_t s, const Graph& g, const std::string& what, int64_t batch) {
    collect(s);
    std::string f;  // the file's text
    static const char* dir_names[] = {"forward", "backward-params", "backward-data", "loss"};
    static const char* op_names[] = {"conv", "relu", "maxpool", "avgpool", "dropout", "flatten", "linear", "bn", "add"};
    double total = 0;
    std::map<std::pair<std::string, int>, double> by_op;
    std::vector<std::tuple<double, int, int>> rows;  // ms, node, dir
    for (const auto& [key, ms] : total_ms_) {
      total += ms;
      const std::string op = key.first < 0 ? "loss" : op_names[static_cast<int>(g.nodes[key.first].op)];
      by_op[{op, key.second}] += ms;
      rows.emplace_back(ms, key.first, key.second);
    }
    std::sort(rows.rbegin(), rows.rend());
    const double steps = std::max<int64_t>(steps_, 1);
    addf(f, "# %s, batch %lld: device ms per step over %lld steps (the first 2 left out), total %.3f\n", what.c_str(),
         static_cast<long long>(batch), static_cast<long long>(steps_), total / steps);
    addf(f, "# by operation and direction\n");
    std::vector<std::pair<double, std::string>> ops;
    for (const auto& [key, ms] : by_op) ops.emplace_back(ms, key.first + " " + dir_names[key.second]);
    std::sort(ops.rbegin(), ops.rend());
    for (const auto& [ms, name] : ops)
      addf(f, "%-28s %9.3f ms %5.1f%%\n", name.c_str(), ms / steps, total > 0 ? 100 * ms / total : 0);
    addf(f, "# by layer (node index, op, input c×h×w → output c×h×w, direction)\n");
    for (const auto& [ms, node, d] : rows) {
      char shape[96] = "";
      if (node >= 0) {
        const Node& n = g.nodes[node];
        std::snprintf(shape, sizeof shape, "%dx%dx%d -> %dx%dx%d k%d s%d", n.in.c, n.in.h, n.in.w, n.out.c, n.out.h,
                      n.out.w, n.kernel, n.stride);
      }
      addf(f, "%4d %-8s %-32s %-16s %9.3f ms %5.1f%%\n", node,
           node < 0 ? "loss" : op_names[static_cast<int>(g.nodes[node].op)], shape, dir_names[d], ms / steps,
           total > 0 ? 100 * ms / total : 0);
    }
    try {
      write_file_atomic(path_, f);
    } catch (const UserError& e) {
      log_warn(std::string("CNNSCALE_GPU_PROFILE: ") + e.what());
    }
  }

 private:
  // printf into out's end (format-checked as printf).
  __attribute__((format(printf, 2, 3))) static void addf(std::string& out, const char* fmt, ...) {
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    const int n = std::vsnprintf(nullptr, 0, fmt, ap);
    if (n > 0) {
      const size_t at = out.size();
      out.resize(at + static_cast<size_t>(n) + 1);
      std::vsnprintf(out.data() + at, static_cast<size_t>(n) + 1, fmt, again);
      out.resize(at + static_cast<size_t>(n));
    }
    va_end(again);
    va_end(ap);
  }

  void record(cudaStream_t s) {
    if (used_ == ev_.size()) {
      cudaEvent_t e = nullptr;
      if (cudaEventCreate(&e) != cudaSuccess) return;
      ev_.push_back(e);
    }
    cudaEventRecord(ev_[used_++], s);
  }
  void collect(cudaStream_t s) {
    if (!open_) return;
    open_ = false;
    cudaStreamSynchronize(s);
    if (++seen_ <= 2 || used_ != slots_.size() + 1) return;
    ++steps_;
    for (size_t i = 0; i < slots_.size(); ++i) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, ev_[i], ev_[i + 1]) == cudaSuccess) total_ms_[slots_[i]] += ms;
    }
  }

  std::string path_;
  std::vector<cudaEvent_t> ev_;
  size_t used_ = 0;
  std::vector<std::pair<int, int>> slots_;  // this step's calls: (node or -1, direction)
  std::map<std::pair<int, int>, double> total_ms_;
  bool open_ = false;
  int64_t seen_ = 0, steps_ = 0;
};

}  // namespace cnnscale::nn::cuda
