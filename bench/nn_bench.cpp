// nn_bench.cpp — CPU kernel benchmark for src/nn (built, never run by tests):
// forward+backward time per batch and achieved GFLOP/s for a model (default mnist_cnn,
// batch 64, 1 thread), the conv2-shaped convolution forward alone, and single-core
// sgemm for reference. FLOPs: 2·MACs per pass; conv/linear have three passes
// (forward, backward-data, backward-weights) except the first layer (no backward-data).
// Usage: nn_bench [--model NAME|SPEC] [--batch N] [--steps N] [--warmup N] [--threads N] [--bf16] [--sync-bn]
//                 [--image-size S] [--classes K] [--train-only]
// (--train-only: the train steps alone; --image-size: 3×S×S input, e.g. resnet50 at 224; ONEDNN_VERBOSE=1 with --steps 1
// --warmup 1 gives one step per primitive for bench/onednn_profile.py)
// (--sync-bn: batch norm through the global-statistics path, one rank, no communication)
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "nn/flop_count.hpp"
#include "nn/model.hpp"
#include "nn/net.hpp"

using namespace cnnscale;
using namespace cnnscale::bench;

int main(int argc, char** argv) {
  std::string model = "mnist_cnn";
  int64_t batch = 64;
  int steps = 20, threads = 1, warmup = 3, image_size = 0, classes = 10;
  bool bf16 = false, sync_bn = false, train_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--model") model = next();
    else if (a == "--batch") batch = std::stoll(next());
    else if (a == "--steps") steps = std::stoi(next());
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--warmup") warmup = std::stoi(next());
    else if (a == "--image-size") image_size = std::stoi(next());
    else if (a == "--classes") classes = std::stoi(next());
    else if (a == "--bf16") bf16 = true;
    else if (a == "--sync-bn") sync_bn = true;
    else if (a == "--train-only") train_only = true;
    else {
      std::fprintf(stderr,
                   "usage: nn_bench [--model NAME|SPEC] [--batch N] [--steps N] [--warmup N] [--threads N] [--bf16] "
                   "[--sync-bn] [--image-size S] [--classes K] [--train-only]\n");
      return 2;
    }
  }
  nn::set_threads(threads);
  SampleShape shape{1, 28, 28};
  if (model == "resnet20") shape = {3, 32, 32};
  if (image_size > 0) shape = {3, image_size, image_size};
  auto m = make_model(model, shape, classes);
  m->init_params(1);
  m->prepare(batch, bf16 ? Precision::bf16 : Precision::fp32);
  std::vector<double> t = time_train_steps(*m, batch, shape, steps, sync_bn, warmup);
  const auto* net = dynamic_cast<nn::Net*>(m.get());
  const double flops = nn::train_flops_per_sample(net->graph()) * batch;
  const double ms = median(t) * 1e3;
  std::printf("model %s  batch %lld  threads %d  precision %s  params %zu%s\n", model.c_str(), (long long)batch,
              nn::threads(), bf16 ? "bf16" : "fp32", m->param_count(), sync_bn ? "  batch norm: --sync-bn path" : "");
  std::printf("train step (fwd+bwd): %.2f ms median of %d  (%.0f images/s)  %.3f GFLOP/step  %.1f GFLOP/s\n", ms,
              steps, batch / (ms * 1e-3), flops * 1e-9, flops / (ms * 1e-3) * 1e-9);

  if (train_only) return 0;
  // Forward only (evaluation path).
  const std::vector<float> images = bench_images(batch, shape);
  std::vector<float> logits(static_cast<size_t>(batch * classes));
  t.clear();
  for (int s = 0; s < steps + warmup; ++s) {
    auto t0 = clk::now();
    m->forward_eval(images.data(), batch, logits.data());
    if (s >= warmup) t.push_back(seconds_since(t0));
  }
  std::printf("eval forward: %.2f ms\n", median(t) * 1e3);

  // conv2 of mnist_cnn alone: 32->64, 3x3, 26x26 input, oneDNN-chosen layouts.
  {
    using namespace dnnl;
    engine eng(engine::kind::cpu, 0);
    stream st(eng);
    const memory::data_type ct = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    memory::desc src({batch, 32, 26, 26}, ct, memory::format_tag::any);
    memory::desc w({64, 32, 3, 3}, ct, memory::format_tag::any);
    memory::desc b({64}, memory::data_type::f32, memory::format_tag::x);
    memory::desc dst({batch, 64, 24, 24}, memory::data_type::f32, memory::format_tag::any);
    convolution_forward::primitive_desc pd({prop_kind::forward_training, algorithm::convolution_direct, src, w, b, dst,
                                            {1, 1}, {0, 0}, {0, 0}},
                                           eng);
    memory ms(pd.src_desc(), eng), mw(pd.weights_desc(), eng), mb(pd.bias_desc(), eng), md(pd.dst_desc(), eng);
    std::memset(ms.get_data_handle(), 0, pd.src_desc().get_size());
    std::memset(mw.get_data_handle(), 0, pd.weights_desc().get_size());
    std::memset(mb.get_data_handle(), 0, pd.bias_desc().get_size());
    convolution_forward conv(pd);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, md}};
    t.clear();
    for (int s = 0; s < steps + 3; ++s) {
      auto t0 = clk::now();
      conv.execute(st, args);
      st.wait();
      if (s >= 3) t.push_back(seconds_since(t0));
    }
    const double f = 2.0 * batch * 64 * 24 * 24 * 32 * 9;
    std::printf("conv2 forward alone (%s): %.2f ms  %.1f GFLOP/s  [%s]\n", bf16 ? "bf16" : "fp32", median(t) * 1e3,
                f / median(t) * 1e-9, pd.impl_info_str());
  }

  // Single-core sgemm reference (oneDNN), 1024^3.
  {
    const int64_t n = 1024;
    std::vector<float> A(n * n, 0.5f), B(n * n, 0.25f), C(n * n);
    t.clear();
    for (int s = 0; s < 5; ++s) {
      auto t0 = clk::now();
      dnnl_sgemm('N', 'N', n, n, n, 1.f, A.data(), n, B.data(), n, 0.f, C.data(), n);
      if (s >= 1) t.push_back(seconds_since(t0));
    }
    const double f = 2.0 * n * n * n;
    std::printf("sgemm 1024^3: %.1f GFLOP/s; model fwd+bwd achieves %.0f%% of it\n", f / median(t) * 1e-9,
                100.0 * (flops / (ms * 1e-3)) / (f / median(t)));
  }
  return 0;
}
