// test_step_model.cpp — the two-level step model of `cnnscale report` on synthetic run
// directories and allreduce measurements generated from known W, γ, F, η, α₁, β₁, α₂, β₂:
// parameters recovered noise-free, projections at 2× and 4× the largest count under ±3 %
// noise (many seeds), no projection across nodes without a cross-node measurement, labels
// of pinned parameters, medians, the hold-out, --project and --points.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "report/analysis.hpp"
#include "report/renderers.hpp"
#include "util/error.hpp"

using namespace cnnscale;
using namespace cnnscale::report;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The generating model, written out independently of the code under test (ms, bytes, B/ms).
struct Truth {
  double W = 800, gamma = 0.05, F = 5, eta = 0.7, S = 4.8e7;
  double a1 = 0.005, b1 = 5e6;    // intra-node: 5 µs, 5 GB/s
  double a2 = 0.030, b2 = 1.2e6;  // cross-node: 30 µs, 1.2 GB/s
  long G = 1024;                  // strong scaling, base 1 rank
  bool weak = false;              // weak scaling: G / 1 images per rank at every count
  double ring(double p, double bytes, double a, double b) const {
    return p <= 1 ? 0 : 2 * (p - 1) / p * bytes / b + 2 * (p - 1) * a;
  }
  double comm(int N, int L) const { return eta * (ring(L, S, a1, b1) + ring(N, S / L, a2, b2)); }
  double compute(int N, int L) const { return W / (weak ? 1 : N * L) * (1 + gamma * (L - 1)) + F; }
  double step(int N, int L) const { return compute(N, L) + comm(N, L); }
};

struct Noise {
  double amp = 0;  // uniform ±amp, multiplicative
  std::mt19937_64 rng{1};
  double operator()() { return amp > 0 ? 1 + std::uniform_real_distribution<double>(-amp, amp)(rng) : 1.0; }
};

RunRecord run_at(const Truth& t, int N, int L, Noise& nz) {
  const int p = N * L;
  const long b = t.weak ? t.G : t.G / p;
  const double step = t.step(N, L) * nz(), comm = t.comm(N, L) * nz();
  const double work = (t.compute(N, L) - t.F) * nz(), opt = t.F * nz();
  json d = {
      {"world_size", p},
      {"nodes", N},
      {"ranks_per_node", L},
      {"backend", "mpi"},
      {"device", "cpu"},
      {"model", "resnet_synth"},
      {"precision", "fp32"},
      {"batch_per_rank", b},
      {"global_batch", b * p},
      {"steps", 200},
      {"timed_steps", 190},
      {"images_per_s", b * p * 1000.0 / step},
      {"step_ms", {{"median", step}, {"p10", step * 0.95}, {"p90", step * 1.08}, {"mean", step * 1.02}}},
      // means deliberately off, to show the report uses the medians
      {"breakdown_ms", {{"data", 0.0}, {"compute", work * 1.3}, {"comm_exposed", comm * 1.3}, {"optimizer", opt}}},
      {"breakdown_median_ms",
       {{"data", 0.1 * work}, {"compute", 0.9 * work}, {"comm_exposed", comm}, {"optimizer", opt}}},
      {"grad_bytes", t.S},
      {"train_loss", 0.3},
      {"test_accuracy", nullptr}};
  RunRecord r = parse_run(d, "synth/" + std::to_string(N) + "x" + std::to_string(L) + "/run.json");
  r.dir = "synth/" + std::to_string(N) + "x" + std::to_string(L);
  return r;
}

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("cnnscale-stepmodel-" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// `cnnscale allreduce --json` files: intra-node at L = 2, 4 (--level node) and cross-node at
// N = 2, 4, 8 with 4 ranks per node (--level cross), sizes 8 B … 64 MiB.
std::vector<std::string> write_benches(const TempDir& dir, const Truth& t, Noise& nz, int tag = 0) {
  std::vector<std::string> files;
  auto one = [&](const std::string& level, int p, int nodes, int rpn, double a, double b) {
    json rows = json::array();
    for (double size = 8; size <= 64.0 * 1024 * 1024; size *= 4)
      rows.push_back({{"size", size}, {"time_us", 1000.0 * t.ring(p, size, a, b) * nz()}, {"wrong", 0}});
    const std::string f = dir.file(level + std::to_string(p) + "-" + std::to_string(tag) + ".json");
    std::ofstream(f) << json{
        {"tool", "cnnscale allreduce"},
        {"world_size", p},
        {"nodes", nodes},
        {"ranks_per_node", rpn},
        {"level", level},
        {"backend", "mpi"},
        {"results", rows}}.dump();
    files.push_back(f);
  };
  for (int L : {2, 4}) one("node", L, 1, L, t.a1, t.b1);
  for (int N : {2, 4, 8}) one("cross", N, N, 4, t.a2, t.b2);
  return files;
}

const std::vector<std::pair<int, int>> kLayouts = {{1, 1}, {1, 2}, {1, 4}, {2, 4}, {4, 4}};

std::vector<RunRecord> runs_for(const Truth& t, Noise& nz, const std::vector<std::pair<int, int>>& layouts = kLayouts) {
  std::vector<RunRecord> runs;
  for (auto [N, L] : layouts) runs.push_back(run_at(t, N, L, nz));
  return runs;
}

const Projection& proj_at(const GroupAnalysis& ga, int ranks) {
  for (const auto& p : ga.projections)
    if (p.ranks == ranks && p.origin != "--project") return p;
  throw std::runtime_error("no projection at " + std::to_string(ranks));
}

double rel(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

}  // namespace

// Noise-free, with allreduce measurements of both levels: every parameter within 5 %
// (in fact to rounding), projections at 2× and 4× equal to the generating model.
TEST(StepModel, TwoLevelFromMeasurementsNoiseFree) {
  const Truth t;
  TempDir dir;
  Noise none;
  ReportOptions o;
  o.allreduce_files = write_benches(dir, t, none);
  const Report rep = analyze_runs(o, runs_for(t, none));
  const auto& ga = rep.groups.at(0);
  ASSERT_TRUE(ga.fit);
  const StepModel& m = ga.fit->model;
  EXPECT_LT(rel(m.work_ms.value, t.W), 1e-6);
  EXPECT_LT(rel(m.growth.value, t.gamma), 1e-6);
  EXPECT_LT(rel(m.fixed_ms.value, t.F), 1e-6);
  EXPECT_LT(rel(m.exposure.value, t.eta), 1e-6);
  EXPECT_EQ(m.exposure.state, ParamState::fitted);
  EXPECT_EQ(m.intra.alpha_ms.state, ParamState::measured);
  EXPECT_LT(rel(m.intra.alpha_ms.value, t.a1), 1e-6);
  EXPECT_LT(rel(m.intra.beta_gbs->value * 1e6, t.b1), 1e-6);
  EXPECT_LT(rel(m.cross.alpha_ms.value, t.a2), 1e-6);
  EXPECT_LT(rel(m.cross.beta_gbs->value * 1e6, t.b2), 1e-6);
  EXPECT_LT(rel(m.cross.kappa_ms.value, t.S / t.b2), 1e-6);
  EXPECT_LT(ga.fit->max_rel_error, 1e-6);
  ASSERT_TRUE(ga.fit->holdout && ga.fit->holdout->rel_error);
  EXPECT_LT(std::fabs(*ga.fit->holdout->rel_error), 1e-6);
  for (int f : {2, 4}) {
    const Projection& p = proj_at(ga, 16 * f);
    ASSERT_TRUE(p.projected);
    EXPECT_EQ(p.layout.nodes, 4.0 * f);
    EXPECT_EQ(p.layout.rpn, 4.0);
    EXPECT_LT(rel(p.step_ms, t.step(4 * f, 4)), 1e-6) << f << "x";
  }
}

// η > 1 (the runs' exposed comm longer than the measured sum: contention) is fitted as it
// is, labelled in the parameter's why and explained in a note; η ≤ 1 gets neither.
TEST(StepModel, ExposureAboveOneIsFlaggedAsContention) {
  for (double eta : {1.6, 0.7}) {
    Truth t;
    t.eta = eta;
    TempDir dir;
    Noise none;
    ReportOptions o;
    o.allreduce_files = write_benches(dir, t, none);
    const Report rep = analyze_runs(o, runs_for(t, none));
    ASSERT_TRUE(rep.groups.at(0).fit);
    const StepModel& m = rep.groups.at(0).fit->model;
    EXPECT_LT(rel(m.exposure.value, eta), 1e-6);
    EXPECT_EQ(m.exposure.state, ParamState::fitted);
    const bool flagged = m.exposure.why.find("above 1") != std::string::npos;
    const bool noted = std::any_of(m.notes.begin(), m.notes.end(),
                                   [](const std::string& n) { return n.find("contention") != std::string::npos; });
    EXPECT_EQ(flagged, eta > 1) << eta;
    EXPECT_EQ(noted, eta > 1) << eta;
  }
}

// Noise-free, runs only (no allreduce files): α, κ of both levels fitted to the runs'
// exposed communication (effective values: η·truth), η labelled as not fitted.
TEST(StepModel, TwoLevelFromRunsOnlyNoiseFree) {
  const Truth t;
  Noise none;
  const Report rep = analyze_runs(ReportOptions{}, runs_for(t, none));
  const StepModel& m = rep.groups.at(0).fit->model;
  EXPECT_EQ(m.exposure.state, ParamState::pinned);
  EXPECT_NE(m.exposure.why.find("not fitted"), std::string::npos);
  EXPECT_LT(rel(m.work_ms.value, t.W), 1e-6);
  EXPECT_LT(rel(m.growth.value, t.gamma), 1e-6);
  EXPECT_LT(rel(m.fixed_ms.value, t.F), 1e-6);
  EXPECT_LT(rel(m.intra.alpha_ms.value, t.eta * t.a1), 1e-6);
  EXPECT_LT(rel(m.intra.kappa_ms.value, t.eta * t.S / t.b1), 1e-6);
  EXPECT_LT(rel(m.cross.alpha_ms.value, t.eta * t.a2), 1e-6);
  EXPECT_LT(rel(m.cross.kappa_ms.value, t.eta * t.S / t.b2), 1e-6);
  for (int f : {2, 4}) EXPECT_LT(rel(proj_at(rep.groups[0], 16 * f).step_ms, t.step(4 * f, 4)), 1e-6);
}

// ±3 % uniform noise on every run's median step, each breakdown part and every allreduce
// row, 200 seeds per case: the projected step time at 2× and 4× the largest fitted count
// (16 ranks → 32, 64) against the generating model. Prints median/p90/max (docs/report.md).
TEST(StepModel, ProjectionWithin10PercentAtThreePercentNoise) {
  const Truth t;
  TempDir dir;
  for (bool with_benches : {true, false}) {
    std::vector<double> err2, err4;
    for (int seed = 1; seed <= 200; ++seed) {
      Noise nz;
      nz.amp = 0.03;
      nz.rng.seed(seed);
      ReportOptions o;
      o.bootstrap = 0;
      if (with_benches) o.allreduce_files = write_benches(dir, t, nz);
      const Report rep = analyze_runs(o, runs_for(t, nz));
      const auto& ga = rep.groups.at(0);
      err2.push_back(rel(proj_at(ga, 32).step_ms, t.step(8, 4)));
      err4.push_back(rel(proj_at(ga, 64).step_ms, t.step(16, 4)));
    }
    for (auto* e : {&err2, &err4}) {
      std::sort(e->begin(), e->end());
      const double med = (*e)[e->size() / 2], p90 = (*e)[e->size() * 9 / 10], mx = e->back();
      std::printf("%s, %s the largest count: median %.2f%%, p90 %.2f%%, max %.2f%% over %zu seeds\n",
                  with_benches ? "with allreduce measurements" : "runs only", e == &err2 ? "2x" : "4x", 100 * med,
                  100 * p90, 100 * mx, e->size());
      if (with_benches) {  // the bar: within 10 % (p90) with the network measured
        EXPECT_LT(p90, 0.10);
        EXPECT_LT(med, 0.05);
      } else if (e == &err2) {  // from the runs alone only 2× holds it; 4× is documented, not promised
        EXPECT_LT(p90, 0.10);
      }
    }
  }
}

// Honest bands (issue 29 item 3): with ±3 % uniform noise on every run (and allreduce
// row), how often the generating model's step time at 2× and 4× the largest count lies
// inside the reported 5–95 % band, over 400 noisy replicates per case. The hidden-truth
// case of the issue (strong scaling, 1×1 … 4×4, two levels, network measured or not) and
// one level (one rank per node) must reach 90 %. Weak scaling must reach 85 %: there the
// projection is an average of the three L = 4 runs and the misfit σ rests on 3 degrees of
// freedom, and even the exact Student-t interval of that least-squares problem covers
// 86.5 % under uniform noise (89.4 % under Gaussian; simulated, docs/report.md). Before the
// bands included the fit's residuals and the leave-one-out fits they covered the truth in
// 26–42 % of replicates (0 % weak). Prints the coverage and band width (docs/report.md).
TEST(StepModel, BandsCoverTheTruthAtThreePercentNoise) {
  TempDir dir;
  struct Case {
    const char* name;
    bool weak, benches;
    std::vector<std::pair<int, int>> layouts;
  };
  const std::vector<Case> cases = {
      {"strong, two levels, network measured", false, true, kLayouts},
      {"strong, two levels, runs only", false, false, kLayouts},
      {"weak, two levels, network measured", true, true, kLayouts},
      {"strong, one level (1 rank per node), runs only", false, false, {{1, 1}, {2, 1}, {4, 1}, {8, 1}, {16, 1}}},
  };
  for (const auto& c : cases) {
    Truth t;
    t.weak = c.weak;
    if (c.weak) t.G = 64;
    int in2 = 0, in4 = 0, n = 0;
    double width = 0;
    const int seeds = std::getenv("CNNSCALE_TEST_SEEDS") ? std::atoi(std::getenv("CNNSCALE_TEST_SEEDS")) : 400;
    for (int seed = 1; seed <= seeds; ++seed) {
      Noise nz;
      nz.amp = std::getenv("CNNSCALE_TEST_AMP") ? std::atof(std::getenv("CNNSCALE_TEST_AMP")) : 0.03;
      nz.rng.seed(1000 + seed);
      ReportOptions o;
      o.bootstrap = 200;
      o.max_factor = 4;
      if (c.benches) o.allreduce_files = write_benches(dir, t, nz);
      const Report rep = analyze_runs(o, runs_for(t, nz, c.layouts));
      const auto& ga = rep.groups.at(0);
      const auto [N, L] = c.layouts.back();
      const Projection &p2 = proj_at(ga, 2 * N * L), &p4 = proj_at(ga, 4 * N * L);
      ASSERT_TRUE(p2.step_lo && p4.step_lo) << c.name;
      const double t2 = t.step(2 * N, L), t4 = t.step(4 * N, L);
      in2 += *p2.step_lo <= t2 && t2 <= *p2.step_hi;
      in4 += *p4.step_lo <= t4 && t4 <= *p4.step_hi;
      width += (*p4.step_hi - *p4.step_lo) / p4.step_ms;
      if (std::getenv("CNNSCALE_TEST_VERBOSE") && seed <= 5)
        std::printf("  %s seed %d: 4x truth %.2f, projected %.2f [%.2f, %.2f]; sigma compute %.4f (dof %d) comm %.4f (dof %d)\n",
                    c.name, seed, t4, p4.step_ms, *p4.step_lo, *p4.step_hi, ga.fit->misfit_sigma_compute,
                    ga.fit->misfit_dof_compute, ga.fit->misfit_sigma_comm, ga.fit->misfit_dof_comm);
      ++n;
    }
    std::printf("%s: truth inside the 5-95%% band at 2x in %d%%, at 4x in %d%% of %d replicates (mean band width "
                "at 4x %.1f%% of the projection)\n",
                c.name, 100 * in2 / n, 100 * in4 / n, n, 100 * width / n);
    const int need = c.weak ? n * 85 / 100 : n * 90 / 100;
    EXPECT_GE(in2, need) << c.name;
    EXPECT_GE(in4, need) << c.name;
  }
}

// Runs on one node only: nothing across nodes is projected, whatever the intra-node data;
// the recommendation keeps out of it. A cross-node measurement unlocks it.
TEST(StepModel, OneNodeOnlyNeverProjectsAcrossNodes) {
  const Truth t;
  TempDir dir;
  Noise none;
  const auto one_node = runs_for(t, none, {{1, 1}, {1, 2}, {1, 4}});
  ReportOptions o;
  o.project = "2,512,3584,64x8";
  std::vector<std::string> benches = write_benches(dir, t, none);
  for (int variant = 0; variant < 2; ++variant) {
    o.allreduce_files = variant == 0 ? std::vector<std::string>{} : std::vector<std::string>{benches[0], benches[1]};
    const Report rep = analyze_runs(o, one_node);
    const auto& ga = rep.groups.at(0);
    ASSERT_FALSE(ga.projections.empty());
    for (const auto& p : ga.projections) {
      if (p.layout.nodes > 1) {
        EXPECT_FALSE(p.projected) << p.ranks;
        EXPECT_EQ(p.why_not, "not projected: no cross-node run or allreduce measurement");
      } else {
        EXPECT_TRUE(p.projected) << p.ranks;  // --project 2 = 1 × 2
      }
    }
    ASSERT_TRUE(ga.recommendation);
    EXPECT_EQ(ga.recommendation->not_projected_from, 8);
    EXPECT_FALSE(ga.recommendation->projected_below);
    EXPECT_FALSE(ga.recommendation->crossing_ranks && *ga.recommendation->crossing_ranks > 4);
    EXPECT_NE(ga.recommendation->text.find("not projected"), std::string::npos) << ga.recommendation->text;
    EXPECT_EQ(ga.fit->model.cross.kappa_ms.state, ParamState::unknown);
    const std::string md = render_markdown(rep);
    EXPECT_NE(md.find("not projected: no cross-node run or allreduce measurement"), std::string::npos);
    EXPECT_NE(md.find("not known"), std::string::npos);  // κ₂ printed as not known, not as 0
  }
  o.allreduce_files = benches;  // with the cross-node measurements
  const Report rep = analyze_runs(o, one_node);
  for (const auto& p : rep.groups.at(0).projections) EXPECT_TRUE(p.projected) << p.ranks;
  // On one node under strong scaling b/b0 = 1/L, so W·γ·(L−1)·b/b0 = W·γ·(1 − b/b0): γ is not
  // separable from W and F, and is pinned (and says so); the network part is exact.
  const auto& mm = rep.groups[0].fit->model;
  EXPECT_EQ(mm.growth.state, ParamState::pinned);
  EXPECT_NE(mm.growth.why.find("two node counts"), std::string::npos) << mm.growth.why;
  EXPECT_LT(rel(mm.exposure.value, t.eta), 1e-6);
  EXPECT_LT(rel(mm.cross.kappa_ms.value, t.S / t.b2), 1e-6);
  EXPECT_LT(rel(mm.comm_ms({4, 4}), t.comm(4, 4)), 1e-6);
}

// The demo case: 2 ranks on one node vs 2 nodes × 1 rank are no longer the same input.
TEST(StepModel, NodesAreNotRanks) {
  const Truth t;
  Noise none;
  const Report a = analyze_runs(ReportOptions{}, runs_for(t, none, {{1, 1}, {1, 2}}));
  const Report b = analyze_runs(ReportOptions{}, runs_for(t, none, {{1, 1}, {2, 1}}));
  EXPECT_FALSE(proj_at(a.groups[0], 4).projected);  // 2 nodes × 2: nothing crossed a node
  EXPECT_TRUE(proj_at(b.groups[0], 4).projected);   // 4 nodes × 1
  EXPECT_LT(rel(proj_at(b.groups[0], 4).step_ms, t.step(4, 1)), 0.05);
}

// Unidentifiable parameters are pinned and say so; printing says "pinned", never a bare 0.
TEST(StepModel, PinnedParametersAreLabelled) {
  const Truth t;
  Noise none;
  const Report rep = analyze_runs(ReportOptions{}, runs_for(t, none, {{1, 1}, {1, 2}}));
  const StepModel& m = rep.groups.at(0).fit->model;
  EXPECT_EQ(m.intra.alpha_ms.state, ParamState::pinned);
  EXPECT_NE(m.intra.alpha_ms.why.find("not separable"), std::string::npos);
  EXPECT_EQ(m.growth.state, ParamState::pinned);
  EXPECT_EQ(m.exposure.state, ParamState::pinned);
  EXPECT_EQ(m.cross.alpha_ms.state, ParamState::unknown);
  EXPECT_FALSE(rep.groups[0].fit->holdout);  // 2 counts
  const std::string md = render_markdown(rep);
  EXPECT_NE(md.find("0 µs (pinned)"), std::string::npos);
  EXPECT_NE(md.find("Hold-out: not done (needs ≥ 3 rank counts)"), std::string::npos);
  EXPECT_NE(md.find("exact by construction"), std::string::npos);  // 2 points, 2+ parameters
  // Weak scaling: W and F are not separable.
  std::vector<RunRecord> weak;
  for (int p : {1, 2, 4}) {
    json d = {{"world_size", p},
              {"nodes", 1},
              {"ranks_per_node", p},
              {"backend", "mpi"},
              {"device", "cpu"},
              {"model", "m"},
              {"precision", "fp32"},
              {"batch_per_rank", 32},
              {"global_batch", 32 * p},
              {"steps", 100},
              {"images_per_s", 32 * p * 1000.0 / (100 + p)},
              {"step_ms", {{"median", 100.0 + p}, {"p10", 95.0}, {"p90", 120.0}}},
              {"breakdown_ms", {{"data", 0}, {"compute", 90}, {"comm_exposed", p - 1.0}, {"optimizer", 5}}},
              {"train_loss", 0.1},
              {"test_accuracy", nullptr}};
    weak.push_back(parse_run(d, "w" + std::to_string(p)));
  }
  const Report wrep = analyze_runs(ReportOptions{}, weak);
  const StepModel& mw = wrep.groups.at(0).fit->model;
  EXPECT_EQ(mw.fixed_ms.state, ParamState::pinned);
  EXPECT_NE(mw.fixed_ms.why.find("not separable from W"), std::string::npos)
      << state_name(mw.fixed_ms.state) << " " << mw.fixed_ms.why << " | " << state_name(mw.growth.state);
}

// Medians throughout: breakdown_median_ms is used (the means in breakdown_ms are 30 % off in
// the synthetic runs); a run without it falls back to the means and the report says so; a
// negative "other" is printed as negative.
TEST(StepModel, MediansAndNegativeOther) {
  const Truth t;
  Noise none;
  auto runs = runs_for(t, none, {{1, 1}, {1, 2}, {1, 4}});
  const Report rep = analyze_runs(ReportOptions{}, runs);
  const auto& ga = rep.groups.at(0);
  for (size_t i = 0; i < ga.rows.size(); ++i) {
    EXPECT_TRUE(ga.rows[i].breakdown_is_median);
    EXPECT_DOUBLE_EQ(ga.rows[i].breakdown.comm_exposed, runs[i].breakdown_median->comm_exposed);
  }
  EXPECT_NE(render_markdown(rep).find("Where the time goes (median ms per step)"), std::string::npos);
  runs[1].breakdown_median.reset();
  runs[2].breakdown_median->optimizer += 7;  // parts exceed the step by 7 ms
  const std::string md = render_markdown(analyze_runs(ReportOptions{}, runs));
  EXPECT_NE(md.find("median step, mean parts"), std::string::npos);
  EXPECT_NE(md.find("no breakdown_median_ms"), std::string::npos);
  EXPECT_NE(md.find("-7.00"), std::string::npos);
  EXPECT_NE(md.find("\"Other\" is negative at 2, 4 rank(s)"), std::string::npos);
  const std::string html = render_html(analyze_runs(ReportOptions{}, runs));
  EXPECT_NE(html.find("other (below 0: parts exceed the step) at 4: -7.000"), std::string::npos);
}

// Hold-out: the largest count mis-measured by +10 % is predicted 1/1.1 − 1 = −9.09 % off.
TEST(StepModel, HoldOutPredictsTheLargestCount) {
  const Truth t;
  TempDir dir;
  Noise none;
  ReportOptions o;
  o.allreduce_files = write_benches(dir, t, none);
  auto runs = runs_for(t, none);
  runs.back().step_ms_median *= 1.1;
  runs.back().step_ms_p90 *= 1.1;
  const Report rep = analyze_runs(o, runs);
  const auto& h = rep.groups.at(0).fit->holdout;
  ASSERT_TRUE(h && h->rel_error);
  EXPECT_EQ(h->ranks, 16);
  EXPECT_NEAR(*h->rel_error, 1 / 1.1 - 1, 1e-6);
  EXPECT_NE(render_markdown(rep).find("error -9.1%"), std::string::npos);
}

// Bands: every fitted parameter and every projection has a 5–95 % band around its value.
TEST(StepModel, BootstrapBands) {
  const Truth t;
  TempDir dir;
  Noise nz;
  nz.amp = 0.03;
  ReportOptions o;
  o.allreduce_files = write_benches(dir, t, nz);
  const Report rep = analyze_runs(o, runs_for(t, nz));
  const auto& fit = *rep.groups.at(0).fit;
  EXPECT_EQ(fit.bootstrap_replicates, 200);
  for (const Param* p : {&fit.model.work_ms, &fit.model.growth, &fit.model.fixed_ms, &fit.model.exposure,
                         &fit.model.cross.kappa_ms, &fit.model.intra.kappa_ms}) {
    ASSERT_TRUE(p->lo && p->hi);
    EXPECT_LT(*p->lo, *p->hi);
  }
  for (const auto& p : rep.groups[0].projections) {
    ASSERT_TRUE(p.step_lo && p.step_hi) << p.ranks;
    EXPECT_LE(*p.step_lo, p.step_ms * 1.0001);
    EXPECT_GE(*p.step_hi, p.step_ms * 0.9999);
  }
}

TEST(StepModel, ProjectSyntax) {
  auto l = parse_layouts("512,3584,64x8,2", 4);
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0].nodes, 128);
  EXPECT_EQ(l[0].rpn, 4);
  EXPECT_EQ(l[1].nodes, 896);
  EXPECT_EQ(l[2].nodes, 64);
  EXPECT_EQ(l[2].rpn, 8);
  EXPECT_EQ(l[3].nodes, 1);
  EXPECT_EQ(l[3].rpn, 2);
  std::string e;
  try {
    parse_layouts("6", 4);
  } catch (const UserError& x) {
    e = x.what();
  }
  EXPECT_NE(e.find("2x4"), std::string::npos) << e;
  EXPECT_THROW(parse_layouts("12q", 4), UserError);
  EXPECT_THROW(parse_layouts("0x4", 4), UserError);
}

// --points: external throughputs beside the model, in tables, CSV, JSON and the charts.
TEST(StepModel, ExternalPoints) {
  const Truth t;
  TempDir dir;
  Noise none;
  const std::string f = dir.file("points.csv");
  std::ofstream(f) << "ranks,nodes,images_per_s,step_ms,label\n64,16,1.5e4,,paper A100\n8,2,2000,512,\n";
  ReportOptions o;
  o.points_file = f;
  o.allreduce_files = write_benches(dir, t, none);
  const Report rep = analyze_runs(o, runs_for(t, none));
  ASSERT_EQ(rep.points.size(), 2u);
  EXPECT_EQ(rep.points[0].label, "paper A100");
  EXPECT_FALSE(rep.points[0].step_ms);
  EXPECT_DOUBLE_EQ(*rep.points[1].step_ms, 512);
  EXPECT_NE(render_markdown(rep).find("paper A100"), std::string::npos);
  EXPECT_NE(render_html(rep).find("external (--points)"), std::string::npos);
  EXPECT_NE(render_csv(rep).find(",external,64,16,"), std::string::npos);
  EXPECT_EQ(render_json(rep)["points"].size(), 2u);
  std::ofstream(f) << "gpus,throughput\n8,100\n";
  EXPECT_THROW(load_points(f), UserError);
  std::ofstream(f) << "ranks,nodes,images_per_s\n8,two,100\n";
  EXPECT_THROW(load_points(f), UserError);
}
