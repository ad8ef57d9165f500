// bench_timing.hpp — what the CPU benchmarks (nn_bench, roofline) share: a clock, the
// median of timings, and timing a model's training forward+backward on a fixed
// synthetic batch (3 warm-up steps left out). Header-only; benchmarks only.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "nn/model.hpp"

namespace cnnscale::bench {

using clk = std::chrono::steady_clock;

inline double seconds_since(clk::time_point t) { return std::chrono::duration<double>(clk::now() - t).count(); }

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Deterministic input images in [-1, 1).
inline std::vector<float> bench_images(int64_t batch, const SampleShape& shape) {
  std::vector<float> images(static_cast<size_t>(batch * shape.numel()));
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.f - 1.f;
  return images;
}

// Seconds of each of `steps` forward_backward calls of m (already prepared for `batch`)
// on deterministic images of `shape` and labels i % 10.
// sync_bn: batch norm through the --sync-bn path with one rank (the sum over ranks is
// the identity): the cost of its own passes, without communication.
inline std::vector<double> time_train_steps(Model& m, int64_t batch, const SampleShape& shape, int steps,
                                            bool sync_bn = false, int warmup = 3) {
  const std::vector<float> images = bench_images(batch, shape);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  std::vector<int64_t> ids(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[size_t(i)] = static_cast<int32_t>(i % 10), ids[size_t(i)] = i;
  StepContext ctx;
  ctx.sample_ids = ids.data();
  ctx.loss_scale = 1.f / static_cast<float>(batch);
  if (sync_bn) ctx.sum_across_ranks = [](double*, size_t) {};
  std::vector<double> t;
  for (int s = 0; s < steps + warmup; ++s) {
    ctx.step = s;
    const auto t0 = clk::now();
    m.forward_backward(images.data(), labels.data(), batch, ctx, {});
    if (s >= warmup) t.push_back(seconds_since(t0));
  }
  return t;
}

}  // namespace cnnscale::bench
