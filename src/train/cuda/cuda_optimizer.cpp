// cuda_optimizer.cpp — see cuda_optimizer.hpp.
#include "train/cuda_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "train/cuda/optimizer_kernels.hpp"
#include "util/cuda/check.hpp"

namespace cnnscale {
namespace {

class CudaOptimizer final : public Optimizer {
 public:
  CudaOptimizer(const OptimizerOptions& o, const std::vector<ParamInfo>& params, size_t n, cudaStream_t s)
      : o_(o), ranges_(trainable_ranges(params)), n_(n), stream_(s) {
    if (o.kind == "sgd") {
      if (o.momentum != 0) names_ = {"momentum_buffer"};
    } else {
      names_ = {"exp_avg", "exp_avg_sq"};
    }
    for (size_t k = 0; k < names_.size(); ++k) {
      float* d = nullptr;
      cudaCheck(cudaMalloc(&d, std::max<size_t>(n, 1) * sizeof(float)));
      cudaCheck(cudaMemsetAsync(d, 0, std::max<size_t>(n, 1) * sizeof(float), stream_));
      dev_.push_back(d);
    }
    host_.resize(names_.size());
    cudaCheck(cudaStreamSynchronize(stream_));
  }
  ~CudaOptimizer() override {
    cudaStreamSynchronize(stream_);
    for (float* d : dev_) cudaFree(d);
  }
  std::string kind() const override { return o_.kind; }

  void step(float* p, const float* g, double lr) override {
    commit_state();  // the host copies from state() may have been written (resume, broadcast)
    if (o_.kind == "sgd") {
      const float mom = static_cast<float>(o_.momentum), wd = static_cast<float>(o_.weight_decay);
      const bool first = steps_ == 0;
      float* buf = dev_.empty() ? nullptr : dev_[0];
      for (auto [b, e] : ranges_)
        cuda_opt::sgd(p + b, g + b, buf ? buf + b : nullptr, e - b, static_cast<float>(lr), mom, wd, first,
                      o_.nesterov, stream_);
      ++steps_;
      return;
    }
    ++steps_;
    const AdamWScalars s = adamw_scalars(o_, steps_, lr);
    for (auto [b, e] : ranges_)
      cuda_opt::adamw(p + b, g + b, dev_[0] + b, dev_[1] + b, e - b, s.decay, s.b1, 1.f - s.b1, s.b2, 1.f - s.b2,
                      s.step_size, s.inv_sqrt_bc2, s.eps, stream_);
  }

  std::vector<std::pair<std::string, std::vector<float>*>> state() override {
    download();
    handed_out_ = true;  // the caller may write them: step() or commit_state() uploads
    std::vector<std::pair<std::string, std::vector<float>*>> out;
    for (size_t k = 0; k < dev_.size(); ++k) out.emplace_back(names_[k], &host_[k]);
    return out;
  }
  std::vector<std::pair<std::string, const std::vector<float>*>> state_view() override {
    download();  // the device copy stays the state: no upload, no wait in the next step()
    std::vector<std::pair<std::string, const std::vector<float>*>> out;
    for (size_t k = 0; k < dev_.size(); ++k) out.emplace_back(names_[k], &host_[k]);
    return out;
  }
  void commit_state() override {
    if (!handed_out_) return;
    for (size_t k = 0; k < dev_.size(); ++k)
      cudaCheck(cudaMemcpyAsync(dev_[k], host_[k].data(), n_ * sizeof(float), cudaMemcpyHostToDevice, stream_));
    cudaCheck(cudaStreamSynchronize(stream_));  // host_ may change after we return
    handed_out_ = false;
  }
  long long steps_taken() const override { return steps_; }
  void set_steps_taken(long long s) override { steps_ = s; }

 private:
  // host_ = the device state, unless the host copies are already the newest (handed out
  // and perhaps written since).
  void download() {
    if (handed_out_) return;
    cudaCheck(cudaStreamSynchronize(stream_));
    for (size_t k = 0; k < dev_.size(); ++k) {
      host_[k].resize(n_);
      cudaCheck(cudaMemcpyAsync(host_[k].data(), dev_[k], n_ * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    }
    cudaCheck(cudaStreamSynchronize(stream_));
  }

  OptimizerOptions o_;
  std::vector<std::pair<size_t, size_t>> ranges_;
  size_t n_ = 0;
  cudaStream_t stream_ = nullptr;
  std::vector<std::string> names_;
  std::vector<float*> dev_;
  std::vector<std::vector<float>> host_;
  bool handed_out_ = false;
  long long steps_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> make_cuda_optimizer(const OptimizerOptions& o, const std::vector<ParamInfo>& params,
                                               size_t param_count, void* stream) {
  make_optimizer(o, params, 0);  // validates the options with the CPU rules and messages
  return std::make_unique<CudaOptimizer>(o, params, param_count, static_cast<cudaStream_t>(stream));
}

}  // namespace cnnscale
