// roofline.cpp — the single-core compute roof for mnist_cnn training and how close
// cnnscale gets to it (built, never run by tests; see docs/performance.md).
//
//  1. Single-thread sgemm GFLOP/s, oneDNN (dnnl_sgemm) and OpenBLAS (cblas_sgemm, when
//     found at build time), at the GEMM shapes of mnist_cnn's conv2 / fc1 (as
//     im2col-style GEMMs) and at a large square shape. The roof is the best rate
//     measured (any shape, either library).
//  2. cnnscale's mnist_cnn training forward+backward (the Model API, 1 thread, batch B)
//     in GFLOP/s, FLOPs counted as docs/models.md does: 2·MACs per pass for every conv
//     and linear, three passes (forward, backward-data, backward-weights), two for the
//     first layer; 71,565,312 FLOP per sample = 4.58 GFLOP per step at batch 64.
//  3. For each --run-json FILE (a `cnnscale train` run.json): the whole training step
//     per rank (data, compute, exposed communication, optimiser included):
//     FLOP/sample × images_per_s / world_size.
//  --model M (with --image-size S, --channels C, --classes K): parts 2 and 3 for that
//     model instead of mnist_cnn (e.g. resnet50 at 3×224×224: its FLOPs per sample).
// Usage: roofline [--batch N] [--steps N] [--square N] [--bf16] [--json] [--run-json FILE]...
//                 [--model M] [--image-size S] [--channels C] [--classes K]
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#ifdef CNNSCALE_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

#include "bench_timing.hpp"
#include "nn/flop_count.hpp"
#include "nn/model.hpp"
#include "nn/net.hpp"

using namespace cnnscale;
using namespace cnnscale::bench;

namespace {

struct Shape {
  const char* what;
  int64_t m, n, k;
};

// Median GFLOP/s of C(m×n) = A(m×k)·B(k×n), row-major, over enough repetitions for ~0.3 s.
template <class F>
double gemm_rate(const Shape& s, F&& gemm) {
  std::vector<float> A(size_t(s.m * s.k)), B(size_t(s.k * s.n)), C(size_t(s.m * s.n));
  for (size_t i = 0; i < A.size(); ++i) A[i] = float(i % 7) * 0.1f;
  for (size_t i = 0; i < B.size(); ++i) B[i] = float(i % 5) * 0.1f;
  const double flop = 2.0 * s.m * s.n * s.k;
  gemm(A.data(), B.data(), C.data());  // warm-up
  auto t0 = clk::now();
  gemm(A.data(), B.data(), C.data());
  const double one = std::max(seconds_since(t0), 1e-6);
  const int reps = std::clamp(int(0.3 / one), 3, 200);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    t0 = clk::now();
    gemm(A.data(), B.data(), C.data());
    t.push_back(seconds_since(t0));
  }
  return flop / median(t) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 64, square = 2048;
  int steps = 30;
  bool bf16 = false, as_json = false;
  std::vector<std::string> runs;
  std::string model = "mnist_cnn";
  SampleShape shape{1, 28, 28};
  int classes = 10;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--batch") batch = std::stoll(next());
    else if (a == "--steps") steps = std::stoi(next());
    else if (a == "--square") square = std::stoll(next());
    else if (a == "--bf16") bf16 = true;
    else if (a == "--json") as_json = true;
    else if (a == "--run-json") runs.push_back(next());
    else if (a == "--model") model = next();
    else if (a == "--image-size") shape.height = shape.width = std::stoi(next());
    else if (a == "--channels") shape.channels = std::stoi(next());
    else if (a == "--classes") classes = std::stoi(next());
    else {
      std::fprintf(stderr,
                   "usage: roofline [--batch N] [--steps N] [--square N] [--bf16] [--json] [--run-json FILE]... "
                   "[--model M] [--image-size S] [--channels C] [--classes K]\n");
      return 2;
    }
  }
  nn::set_threads(1);
#ifdef CNNSCALE_HAVE_OPENBLAS
  openblas_set_num_threads(1);
#endif
  nlohmann::json out;
  out["threads"] = 1;

  // 1. sgemm.
  const std::vector<Shape> shapes = {
      {"conv2 fwd as GEMM (N*24*24 x 64 x 32*9)", batch * 24 * 24, 64, 32 * 9},
      {"conv2 bwd-weights as GEMM (64 x 32*9 x N*24*24)", 64, 32 * 9, batch * 24 * 24},
      {"fc1 fwd (N x 128 x 9216)", batch, 128, 9216},
      {"square", square, square, square},
  };
  double roof = 0;
  nlohmann::json sg = nlohmann::json::array();
  for (const auto& s : shapes) {
    nlohmann::json row = {{"shape", s.what}, {"m", s.m}, {"n", s.n}, {"k", s.k}};
    const double d = gemm_rate(s, [&](const float* A, const float* B, float* C) {
      dnnl_sgemm('N', 'N', s.m, s.n, s.k, 1.f, A, s.k, B, s.n, 0.f, C, s.n);
    });
    row["onednn_gflops"] = d;
    double best = d;
#ifdef CNNSCALE_HAVE_OPENBLAS
    const double o = gemm_rate(s, [&](const float* A, const float* B, float* C) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(s.m), int(s.n), int(s.k), 1.f, A, int(s.k), B,
                  int(s.n), 0.f, C, int(s.n));
    });
    row["openblas_gflops"] = o;
    best = std::max(best, o);
#else
    row["openblas_gflops"] = nullptr;
#endif
    roof = std::max(roof, best);  // the roof: the best rate measured at any shape, either library
    sg.push_back(row);
  }
  out["sgemm"] = sg;
  out["roof_gflops"] = roof;

  // Single-thread memcpy bandwidth (bytes copied per second), the figure
  // `cnnscale allreduce` on 2 ranks of one node is compared with. 64 MiB (beyond cache)
  // and 4.7 MB (mnist_cnn's gradient).
  nlohmann::json mc = nlohmann::json::array();
  for (size_t bytes : {size_t(64) << 20, size_t(4799528)}) {
    std::vector<char> a(bytes, 1), b(bytes, 0);
    std::vector<double> tm;
    for (int r = 0; r < 12; ++r) {
      auto t0 = clk::now();
      std::memcpy(b.data(), a.data(), bytes);
      if (r >= 2) tm.push_back(seconds_since(t0));
      a[size_t(r)] = b[size_t(r) + 1];
    }
    mc.push_back({{"bytes", bytes}, {"gbps", double(bytes) / median(tm) * 1e-9}});
  }
  out["memcpy"] = mc;

  // 2. cnnscale mnist_cnn forward+backward on one thread.
  auto m = make_model(model, shape, classes);
  m->init_params(1);
  m->prepare(batch, bf16 ? Precision::bf16 : Precision::fp32);
  const std::vector<double> t = time_train_steps(*m, batch, shape, steps);
  out["model"] = model;
  const double fps = nn::train_flops_per_sample(dynamic_cast<nn::Net*>(m.get())->graph());
  const double step_s = median(t);
  const double gf = fps * double(batch) / step_s * 1e-9;
  out["flop_per_sample"] = fps;
  out["flop_per_step"] = fps * double(batch);
  out["batch"] = batch;
  out["precision"] = bf16 ? "bf16" : "fp32";
  out["fwd_bwd"] = {{"step_ms", step_s * 1e3}, {"gflops", gf}, {"fraction_of_roof", gf / roof}};

  // 3. Whole training steps from run.json files.
  nlohmann::json rr = nlohmann::json::array();
  for (const auto& path : runs) {
    std::ifstream f(path);
    if (!f) {
      std::fprintf(stderr, "roofline: error: cannot read %s\n", path.c_str());
      return 1;
    }
    nlohmann::json j = nlohmann::json::parse(f);
    const double ips = j.at("images_per_s").get<double>();
    const int w = j.at("world_size").get<int>();
    const double per_rank = fps * ips / w * 1e-9;
    rr.push_back({{"run_json", path}, {"world_size", w}, {"precision", j.value("precision", "")},
                  {"images_per_s", ips}, {"gflops_per_rank", per_rank}, {"fraction_of_roof", per_rank / roof}});
  }
  out["runs"] = rr;

  if (as_json) {
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("single-core sgemm, GFLOP/s (row-major C = A·B, 1 thread):\n");
  for (const auto& r : sg) {
    std::printf("  %-50s oneDNN %7.1f", r["shape"].get<std::string>().c_str(), r["onednn_gflops"].get<double>());
    if (r["openblas_gflops"].is_number()) std::printf("   OpenBLAS %7.1f", r["openblas_gflops"].get<double>());
    std::printf("\n");
  }
  for (const auto& r : mc)
    std::printf("memcpy %zu bytes, 1 thread: %.1f GB/s\n", r["bytes"].get<size_t>(), r["gbps"].get<double>());
  std::printf("roof (best sgemm measured): %.1f GFLOP/s\n", roof);
  std::printf("%s training FLOPs: %.0f per sample, %.3f GFLOP per step at batch %lld\n", model.c_str(), fps,
              fps * double(batch) * 1e-9, (long long)batch);
  std::printf("cnnscale fwd+bwd (%s, 1 thread): %.2f ms/step, %.1f GFLOP/s = %.0f%% of roof\n", bf16 ? "bf16" : "fp32",
              step_s * 1e3, gf, 100 * gf / roof);
  for (const auto& r : rr)
    std::printf("cnnscale train %s, %d rank(s): %.0f img/s -> %.1f GFLOP/s per rank = %.0f%% of roof\n",
                r["run_json"].get<std::string>().c_str(), r["world_size"].get<int>(),
                r["images_per_s"].get<double>(), r["gflops_per_rank"].get<double>(),
                100 * r["fraction_of_roof"].get<double>());
  return 0;
}
