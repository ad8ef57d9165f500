// optimizer_bench — what the host optimisers' finiteness check costs (issue 39 item 1):
// one update of N parameters (default 25.6M, ResNet-50's count) by SGD with momentum and
// by AdamW, with the check on and off (OptimizerOptions::check_finite), alternating
// on-off, off-on, … in one process; and the checkpoint writer's scan of the same
// parameters and their state (all_finite_f32). Prints the median of each.
// Usage: optimizer_bench [N] [ROUNDS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "train/optimizer.hpp"
#include "util/finite.hpp"

using namespace cnnscale;
using bench::clk;

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 25'557'032;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 21;
  std::vector<ParamInfo> params(1);
  params[0].name = "w";
  params[0].shape = {static_cast<int64_t>(n)};
  params[0].numel = n;
  std::vector<float> p(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    p[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.f - 1.f;
    g[i] = static_cast<float>((i * 40503u) % 1000) / 1e5f;
  }
  std::printf("optimizer_bench: %zu parameters, %d alternating rounds\n", n, rounds);
  for (const char* kind : {"sgd", "adamw"}) {
    OptimizerOptions on, off;
    on.kind = off.kind = kind;
    off.check_finite = false;
    auto a = make_optimizer(on, params, n), b = make_optimizer(off, params, n);
    std::vector<double> ton, toff;
    for (int r = 0; r < rounds; ++r) {
      for (int k = 0; k < 2; ++k) {
        const bool check = (r + k) % 2 == 0;  // ABBA order
        Optimizer& o = check ? *a : *b;
        const auto t0 = clk::now();
        o.step(p.data(), g.data(), 1e-6);
        (check ? ton : toff).push_back(bench::seconds_since(t0));
      }
    }
    if (!a->wrote_finite()) std::printf("unexpected: a non-finite value\n");
    std::printf("%-5s update: check on %.2f ms, off %.2f ms (median): cost %+.1f %%\n", kind,
                bench::median(ton) * 1e3, bench::median(toff) * 1e3,
                (bench::median(ton) / bench::median(toff) - 1) * 100);
  }
  std::vector<double> scan;
  bool finite = true;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = clk::now();
    finite &= all_finite_f32(p.data(), n) && all_finite_f32(g.data(), n);
    scan.push_back(bench::seconds_since(t0));
  }
  std::printf("checkpoint scan of parameters + one state tensor (%zu values): %.2f ms (median)%s\n", 2 * n,
              bench::median(scan) * 1e3, finite ? "" : " (non-finite!)");
}
