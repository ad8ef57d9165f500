// test_report.cpp — `cnnscale report` arithmetic: hand-computed tables, Karp–Flatt on
// data generated from Amdahl's law, α–β fits of allreduce benchmarks, grouping and bad
// input. The two-level step model: test_step_model.cpp.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/user_error.hpp"
#include "report/analysis.hpp"
#include "report/renderers.hpp"
#include "report/report_tables.hpp"
#include "report/svg_chart.hpp"
#include "util/error.hpp"

using namespace cnnscale;
using namespace cnnscale::report;
using nlohmann::json;

namespace {

// A run.json document with the SPEC fields. step median T (ms); throughput = G/T.
json run_doc(int p, long batch_per_rank, double step_ms, double data, double compute, double comm, double opt,
             const std::string& model = "mnist_cnn") {
  const long g = batch_per_rank * p;
  return {{"world_size", p},
          {"nodes", (p + 3) / 4},
          {"ranks_per_node", std::min(p, 4)},
          {"backend", "mpi"},
          {"device", "cpu"},
          {"model", model},
          {"precision", "fp32"},
          {"batch_per_rank", batch_per_rank},
          {"global_batch", g},
          {"steps", 100},
          {"images_per_s", g * 1000.0 / step_ms},
          {"step_ms", {{"median", step_ms}, {"p10", step_ms * 0.9}, {"p90", step_ms * 1.2}}},
          {"breakdown_ms", {{"data", data}, {"compute", compute}, {"comm_exposed", comm}, {"optimizer", opt}}},
          {"train_loss", 0.3},
          {"test_accuracy", nullptr}};
}

// "prefix" + p without GCC 12's false -Wrestrict on operator+(const char*, string&&).
std::string nm(const char* prefix, int p) {
  std::string s(prefix);
  s += std::to_string(p);
  return s;
}

RunRecord rec(const json& doc, const std::string& name) {
  RunRecord r = parse_run(doc, name + "/run.json");
  r.dir = name;
  return r;
}

std::string error_of(const std::function<void()>& f) { return test::user_error_of(f, "(no error)"); }

ReportOptions opts(double threshold = 0.8) {
  ReportOptions o;
  o.efficiency_threshold = threshold;
  return o;
}

// Ring allreduce in ms, written out independently of the code under test.
double ring(int p, double bytes, double alpha_ms, double beta_bpms) {
  return p == 1 ? 0.0 : 2.0 * (p - 1) / p * bytes / beta_bpms + 2.0 * (p - 1) * alpha_ms;
}

}  // namespace

// Hand-computed: G = 240; 100, 180, 300 images/s at 1, 2, 4 ranks.
// S = 1.8, 3.0; E = 0.9, 0.75; e = (1/1.8 - 1/2)/(1 - 1/2) = 1/9 and (1/3 - 1/4)/(3/4) = 1/9.
// p10/p90 images/s from step p90/p10: 240 images / 2.88 s = 83.33, / 2.16 s = 111.1.
TEST(ReportTable, HandComputedStrong) {
  std::vector<RunRecord> runs = {rec(run_doc(1, 240, 2400, 100, 2000, 0, 300), "r1"),
                                 rec(run_doc(2, 120, 240000.0 / 180, 50, 1000, 100, 300), "r2"),
                                 rec(run_doc(4, 60, 800, 25, 500, 100, 150), "r4")};
  Report rep = analyze_runs(opts(), runs);
  ASSERT_EQ(rep.groups.size(), 1u);
  const auto& ga = rep.groups[0];
  EXPECT_EQ(ga.group.mode, ScalingMode::strong);
  ASSERT_EQ(ga.rows.size(), 3u);
  EXPECT_NEAR(ga.rows[0].images_per_s, 100.0, 1e-9);
  EXPECT_NEAR(ga.rows[1].speedup, 1.8, 1e-12);
  EXPECT_NEAR(ga.rows[2].speedup, 3.0, 1e-12);
  EXPECT_NEAR(ga.rows[1].efficiency, 0.9, 1e-12);
  EXPECT_NEAR(ga.rows[2].efficiency, 0.75, 1e-12);
  EXPECT_FALSE(ga.rows[0].karp_flatt.has_value());
  EXPECT_NEAR(*ga.rows[1].karp_flatt, 1.0 / 9, 1e-12);
  EXPECT_NEAR(*ga.rows[2].karp_flatt, 1.0 / 9, 1e-12);
  EXPECT_NEAR(ga.rows[0].images_per_s_p10, 83.3333333333, 1e-6);
  EXPECT_NEAR(ga.rows[0].images_per_s_p90, 111.111111111, 1e-6);
  // Recommendation: 2 ranks keep 90% ≥ 80%; 4 ranks (75%) fall below.
  ASSERT_TRUE(ga.recommendation);
  EXPECT_EQ(ga.recommendation->recommended_ranks, 2);
  EXPECT_EQ(ga.recommendation->measured_below, 4);
  EXPECT_NE(ga.recommendation->text.find("up to 2 ranks"), std::string::npos);
}

// Words a user saw wrong in Chromium (issue 26): "up to 1 ranks", a stray "(detected)"
// after the mode sentence's full stop, a legend name cut at the chart's edge.
TEST(ReportText, OneRankSingularModeSentenceAndWrappedLegend) {
  std::vector<RunRecord> runs = {rec(run_doc(1, 240, 2400, 100, 2000, 0, 300), "r1"),
                                 rec(run_doc(2, 120, 2400, 50, 1000, 1000, 300), "r2")};  // no speedup at 2
  const Report rep = analyze_runs(opts(), runs);
  const auto& ga = rep.groups.at(0);
  ASSERT_TRUE(ga.recommendation);
  EXPECT_EQ(ga.recommendation->recommended_ranks, 1);
  EXPECT_NE(ga.recommendation->text.find("up to 1 rank (1 node)"), std::string::npos) << ga.recommendation->text;
  EXPECT_NE(ga.recommendation->text.find("at 2 ranks."), std::string::npos) << ga.recommendation->text;
  const std::string m = mode_sentence(ga);
  EXPECT_EQ(m.rfind("Strong scaling (detected from the runs' batch sizes): the global batch stays at 240", 0), 0u) << m;
  EXPECT_EQ(m.find(". (detected)"), std::string::npos) << m;
  StackedBarChart c;
  c.title = "t";
  c.categories = {"1"};
  c.stacks = {{"other (below 0: parts exceed the step)", "#bcbd22", {1.0}}, {"data", "#2ca02c", {1.0}}};
  const std::string svg = render_svg(c);
  // Wrapped into lines of at most 19 characters (the right margin at 12 px), none cut.
  EXPECT_NE(svg.find("<tspan x=\"508.0\">other (below 0:</tspan><tspan x=\"508.0\" dy=\"14\">parts exceed the</tspan>"
                     "<tspan x=\"508.0\" dy=\"14\">step)</tspan>"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find(">data</text>"), std::string::npos);  // a short name stays one line
}

// Same speedups relative to a base of 2 ranks: q = p/p0 is what counts.
TEST(ReportTable, RelativeToSmallestCount) {
  std::vector<RunRecord> runs = {rec(run_doc(8, 30, 240000.0 / 600, 0, 100, 0, 0), "r8"),
                                 rec(run_doc(2, 120, 240000.0 / 200, 0, 100, 0, 0), "r2"),
                                 rec(run_doc(4, 60, 240000.0 / 360, 0, 100, 0, 0), "r4")};
  const Report rep1 = analyze_runs(opts(), runs);
  const auto& ga = rep1.groups.at(0);
  ASSERT_EQ(ga.rows.size(), 3u);
  EXPECT_EQ(ga.rows[0].ranks, 2);
  EXPECT_EQ(ga.rows[2].ranks, 8);
  EXPECT_NEAR(ga.rows[1].efficiency, 0.9, 1e-12);
  EXPECT_NEAR(ga.rows[2].efficiency, 0.75, 1e-12);
  EXPECT_NEAR(*ga.rows[2].karp_flatt, 1.0 / 9, 1e-12);
}

// Weak scaling: per-rank batch 32 constant; 100 → 360 images/s at 1 → 4 ranks: S = 3.6, E = 0.9.
TEST(ReportTable, WeakScalingDetected) {
  std::vector<RunRecord> runs = {rec(run_doc(1, 32, 320, 0, 300, 0, 20), "w1"),
                                 rec(run_doc(4, 32, 128000.0 / 360, 0, 300, 40, 20), "w4")};
  const Report rep2 = analyze_runs(opts(), runs);
  const auto& ga = rep2.groups.at(0);
  EXPECT_EQ(ga.group.mode, ScalingMode::weak);
  EXPECT_NEAR(ga.rows[1].speedup, 3.6, 1e-12);
  EXPECT_NEAR(ga.rows[1].efficiency, 0.9, 1e-12);
  // --mode strong overrides, with a note because the global batch is not constant.
  ReportOptions o = opts();
  o.mode = ScalingMode::strong;
  const Report rep3 = analyze_runs(o, runs);
  const auto& forced = rep3.groups.at(0);
  EXPECT_EQ(forced.group.mode, ScalingMode::strong);
  EXPECT_TRUE(forced.group.mode_forced);
  EXPECT_FALSE(forced.group.notes.empty());
}

// Amdahl's law with serial fraction f: T(p) = T1 (f + (1-f)/p). Karp–Flatt must return f
// at every count; the model (W = (1-f)T1, F = f T1, no communication) must reproduce the
// runs exactly and project Amdahl's speedup; the efficiency threshold crossing is at
// p* = (1/thr - 1 + f)/f.
TEST(ReportModel, AmdahlKarpFlattRecoversSerialFraction) {
  for (double f : {0.01, 0.07, 0.25}) {
    const double t1 = 500;
    std::vector<RunRecord> runs;
    for (int p : {1, 2, 4, 8, 16}) {
      const double t = t1 * (f + (1 - f) / p);
      runs.push_back(
          rec(run_doc(p, 1024 / p, t, 0.1 * t1 * (1 - f) / p, 0.9 * t1 * (1 - f) / p, 0, t1 * f), nm("a", p)));
    }
    const Report rep4 = analyze_runs(opts(), runs);
    const auto& ga = rep4.groups.at(0);
    for (const auto& r : ga.rows) {
      const double amdahl = 1.0 / (f + (1 - f) / r.ranks);
      EXPECT_NEAR(r.speedup, amdahl, 1e-9 * amdahl) << "f=" << f << " p=" << r.ranks;
      if (r.ranks > 1) {
        EXPECT_NEAR(*r.karp_flatt, f, 1e-9) << "f=" << f << " p=" << r.ranks;
      }
    }
    ASSERT_TRUE(ga.fit);
    EXPECT_LT(ga.fit->max_rel_error, 1e-9);
    ASSERT_EQ(ga.projections.size(), 6u);  // 2x..64x
    EXPECT_EQ(ga.projections.back().ranks, 16 * 64);
    for (const auto& pr : ga.projections) {
      const double amdahl = 1.0 / (f + (1 - f) / pr.ranks);
      EXPECT_NEAR(pr.speedup, amdahl, 1e-9 * amdahl) << "f=" << f << " p=" << pr.ranks;
      EXPECT_NEAR(pr.efficiency, amdahl / pr.ranks, 1e-9);
    }
    const double crossing = (1 / 0.8 - 1 + f) / f;
    ASSERT_TRUE(ga.recommendation->crossing_ranks) << "f=" << f;
    EXPECT_NEAR(*ga.recommendation->crossing_ranks, crossing, 1e-6 * crossing) << "f=" << f;
    // Largest measured count with E ≥ 0.8: the largest p ≤ p*.
    int expect_rec = 1;
    for (int p : {1, 2, 4, 8, 16})
      if (p <= crossing) expect_rec = p;
    EXPECT_EQ(ga.recommendation->recommended_ranks, expect_rec) << "f=" << f;
    if (crossing > 16) {
      // First doubled count beyond the crossing.
      int first = 32;
      while (first < crossing) first *= 2;
      EXPECT_EQ(ga.recommendation->projected_below, first) << "f=" << f;
      EXPECT_FALSE(ga.recommendation->measured_below);
    }
  }
}

// α, β fitted from a `cnnscale allreduce --json` file generated from the ring model at 8
// ranks (a file without `level` and `nodes` is an intra-node measurement); a single-rank
// benchmark is refused. (The two-level model on runs: test_step_model.cpp.)
TEST(ReportModel, AlphaBetaFromAllreduceBenchmark) {
  const double alpha_ms = 0.025, beta = 1.2e7;
  const int n = 8;
  json rows = json::array();
  for (double size = 8; size <= 64.0 * 1024 * 1024; size *= 4)
    rows.push_back({{"size", size},
                    {"count", size / 4},
                    {"type", "float"},
                    {"time_us", 1000.0 * ring(n, size, alpha_ms, beta)},
                    {"algbw_gbs", 0},
                    {"busbw_gbs", 0},
                    {"wrong", 0}});
  const std::string file = "/tmp/cnnscale-test-allreduce-" + std::to_string(::getpid()) + ".json";
  std::ofstream(file) << json{{"world_size", n}, {"backend", "mpi"}, {"type", "float"}, {"results", rows}}.dump();
  AllreduceBenchmark b = load_allreduce_benchmark(file);
  EXPECT_EQ(b.kind(), NetLevelKind::intra);
  AlphaBeta ab = fit_alpha_beta_benchmark(b);
  EXPECT_NEAR(ab.alpha_ms, alpha_ms, 1e-9 * alpha_ms);
  EXPECT_NEAR(ab.beta_bytes_per_ms, beta, 1e-9 * beta);
  EXPECT_LT(ab.max_rel_error, 1e-9);
  std::filesystem::remove(file);

  // A single-rank benchmark cannot give α, β.
  std::ofstream(file) << json{{"world_size", 1}, {"results", rows}}.dump();
  EXPECT_NE(error_of([&] { load_allreduce_benchmark(file); }).find("at least 2 ranks"), std::string::npos);
  // Levels: a flat sum over 2 nodes × 4 ranks is neither level; 1 rank per node is cross-node.
  std::ofstream(file) << json{{"world_size", 8}, {"nodes", 2}, {"results", rows}}.dump();
  EXPECT_EQ(load_allreduce_benchmark(file).kind(), NetLevelKind::unusable);
  std::ofstream(file) << json{{"world_size", 2}, {"nodes", 2}, {"results", rows}}.dump();
  EXPECT_EQ(load_allreduce_benchmark(file).kind(), NetLevelKind::cross);
  std::ofstream(file)
      << json{{"world_size", 2}, {"nodes", 2}, {"ranks_per_node", 4}, {"level", "cross"}, {"results", rows}}.dump();
  EXPECT_EQ(load_allreduce_benchmark(file).kind(), NetLevelKind::cross);
  std::ofstream(file) << json{{"world_size", 2}, {"level", "sideways"}, {"results", rows}}.dump();
  EXPECT_NE(error_of([&] { load_allreduce_benchmark(file); }).find("'level'"), std::string::npos);
  std::filesystem::remove(file);
}

// Noisy benchmark (±2% alternating): the fit stays close.
TEST(ReportModel, AlphaBetaBenchmarkToleratesNoise) {
  const double alpha_ms = 0.01, beta = 2e7;
  AllreduceBenchmark b;
  b.file = "noisy";
  b.world_size = 4;
  int i = 0;
  for (double size = 64; size <= 256.0 * 1024 * 1024; size *= 2, ++i)
    b.rows.push_back({size, ring(4, size, alpha_ms, beta) * (i % 2 ? 1.02 : 0.98)});
  AlphaBeta ab = fit_alpha_beta_benchmark(b);
  EXPECT_NEAR(ab.alpha_ms, alpha_ms, 0.05 * alpha_ms);
  EXPECT_NEAR(ab.beta_bytes_per_ms, beta, 0.05 * beta);
  EXPECT_NEAR(ab.max_rel_error, 0.02, 0.01);
}

TEST(ReportGroups, MixedModelsIsAnErrorNamingBoth) {
  std::vector<RunRecord> runs = {rec(run_doc(1, 64, 100, 0, 90, 0, 10, "mnist_cnn"), "m1"),
                                 rec(run_doc(2, 32, 60, 0, 45, 5, 10, "resnet18"), "m2")};
  const std::string e = error_of([&] { analyze_runs(opts(), runs); });
  EXPECT_NE(e.find("different models"), std::string::npos) << e;
  EXPECT_NE(e.find("mnist_cnn"), std::string::npos) << e;
  EXPECT_NE(e.find("resnet18"), std::string::npos) << e;
  EXPECT_NE(e.find("m2"), std::string::npos) << e;
}

TEST(ReportGroups, NeitherBatchConstantIsAnError) {
  std::vector<RunRecord> runs = {rec(run_doc(1, 64, 100, 0, 90, 0, 10), "x1"),
                                 rec(run_doc(2, 48, 60, 0, 45, 5, 10), "x2")};
  const std::string e = error_of([&] { analyze_runs(opts(), runs); });
  EXPECT_NE(e.find("--mode"), std::string::npos) << e;
  ReportOptions o = opts();
  o.mode = ScalingMode::weak;
  EXPECT_EQ(analyze_runs(o, runs).groups.at(0).group.mode, ScalingMode::weak);
}

TEST(ReportGroups, SeparateGroupsPerPrecision) {
  json bf = run_doc(2, 32, 50, 0, 45, 5, 0);
  bf["precision"] = "bf16";
  std::vector<RunRecord> runs = {rec(run_doc(1, 64, 100, 0, 90, 0, 10), "f1"),
                                 rec(run_doc(2, 32, 60, 0, 45, 5, 10), "f2"), rec(bf, "b2")};
  Report rep = analyze_runs(opts(), runs);
  ASSERT_EQ(rep.groups.size(), 2u);
  EXPECT_TRUE(rep.groups[0].scalable);
  EXPECT_FALSE(rep.groups[1].scalable);
}

// run.json "tf32": true (a GPU run with TF32, train --tf32 on) is not compared with
// full-fp32 runs; false or absent is plain fp32.
TEST(ReportGroups, Tf32RunsAreTheirOwnGroup) {
  json t2 = run_doc(2, 32, 40, 0, 35, 5, 0), f2 = run_doc(2, 32, 60, 0, 45, 5, 10);
  t2["tf32"] = true;
  f2["tf32"] = false;
  std::vector<RunRecord> runs = {rec(run_doc(1, 64, 100, 0, 90, 0, 10), "f1"), rec(f2, "f2"), rec(t2, "t2")};
  EXPECT_EQ(runs[1].precision, "fp32");
  EXPECT_EQ(runs[2].precision, "fp32+tf32");
  Report rep = analyze_runs(opts(), runs);
  ASSERT_EQ(rep.groups.size(), 2u);
  EXPECT_EQ(rep.groups[0].group.precision, "fp32");
  EXPECT_EQ(rep.groups[1].group.precision, "fp32+tf32");
}

TEST(ReportGroups, RepeatsUseTheMedianRun) {
  std::vector<RunRecord> runs = {
      rec(run_doc(1, 64, 100, 0, 90, 0, 10), "s1"), rec(run_doc(2, 32, 70, 0, 45, 5, 10), "slow"),
      rec(run_doc(2, 32, 50, 0, 45, 5, 10), "fast"), rec(run_doc(2, 32, 60, 0, 45, 5, 10), "mid")};
  const Report rep7 = analyze_runs(opts(), runs);
  const auto& ga = rep7.groups.at(0);
  ASSERT_EQ(ga.rows.size(), 2u);
  EXPECT_EQ(ga.group.runs[1].dir, "mid");
  EXPECT_EQ(ga.rows[1].repeats, 3);
}

TEST(ReportGroups, SingleRunIsReportedWithoutAModel) {
  Report rep = analyze_runs(opts(), {rec(run_doc(4, 16, 80, 0, 70, 5, 5), "only")});
  const auto& ga = rep.groups.at(0);
  EXPECT_FALSE(ga.scalable);
  EXPECT_FALSE(ga.fit);
  EXPECT_FALSE(ga.recommendation);
  ASSERT_EQ(ga.rows.size(), 1u);
  ASSERT_FALSE(ga.notes.empty());
  EXPECT_NE(ga.notes[0].find("two or more rank counts"), std::string::npos);
  // Every output renders.
  EXPECT_NE(render_markdown(rep).find("two or more rank counts"), std::string::npos);
  EXPECT_NE(render_html(rep).find("</html>"), std::string::npos);
  EXPECT_EQ(render_json(rep)["groups"][0]["scalable"], false);
}

// run.json's timeline (train --timeline): listed with a link when the file exists,
// marked when it is gone; runs without one add nothing.
TEST(ReportTimeline, ListedWhenRunJsonNamesOne) {
  const std::string file = std::filesystem::temp_directory_path().string() + "/cnnscale-test-timeline-" +
                           std::to_string(::getpid()) + ".json";
  std::ofstream(file) << "{\"traceEvents\": []}";
  json with = run_doc(2, 16, 80, 0, 70, 5, 5);
  with["timeline"] = file;
  json gone = run_doc(4, 16, 90, 0, 70, 15, 5);
  gone["timeline"] = "/nonexistent/t.json";
  const Report rep =
      analyze_runs(opts(), {rec(with, "r2"), rec(gone, "r4"), rec(run_doc(1, 16, 75, 0, 70, 0, 5), "r1")});
  const std::string md = render_markdown(rep), html = render_html(rep);
  EXPECT_NE(md.find("## Step timelines"), std::string::npos);
  EXPECT_NE(md.find("- Step timeline of r2 (2 ranks): " + file + " — open it in https://ui.perfetto.dev"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- Step timeline of r4 (4 ranks): /nonexistent/t.json (not found now)."), std::string::npos);
  EXPECT_EQ(md.find("Step timeline of r1"), std::string::npos);
  EXPECT_NE(html.find("<a href=\"file://" + file + "\">"), std::string::npos);
  EXPECT_EQ(html.find("file:///nonexistent"), std::string::npos);
  const json j = render_json(rep);
  size_t named = 0;
  for (const auto& r : j["groups"][0]["runs"]) named += r["timeline"].is_string();
  EXPECT_EQ(named, 2u);
  // Without any timeline, no section.
  EXPECT_EQ(render_markdown(analyze_runs(opts(), {rec(run_doc(1, 16, 75, 0, 70, 0, 5), "r1")})).find("Step timelines"),
            std::string::npos);
  std::filesystem::remove(file);
}

TEST(ReportAccuracy, TimeToTarget) {
  json a = run_doc(1, 64, 100, 0, 90, 0, 10), b = run_doc(2, 32, 55, 0, 45, 0, 10);
  a["time_to_accuracy"] = json::array({{{"accuracy", 0.8}, {"seconds", 40}}, {{"accuracy", 0.9}, {"seconds", 90}}});
  b["time_to_accuracy"] = json::array({{{"accuracy", 0.8}, {"seconds", 25}}, {{"accuracy", 0.85}, {"seconds", 45}}});
  std::vector<RunRecord> runs = {rec(a, "t1"), rec(b, "t2")};
  // Default target: highest accuracy every run reached = min(0.9, 0.85) = 0.85.
  const Report rep8 = analyze_runs(opts(), runs);
  const auto& ga = rep8.groups.at(0);
  ASSERT_TRUE(ga.target_accuracy);
  EXPECT_DOUBLE_EQ(*ga.target_accuracy, 0.85);
  EXPECT_DOUBLE_EQ(*ga.rows[0].time_to_target_s, 90);  // first entry ≥ 0.85
  EXPECT_DOUBLE_EQ(*ga.rows[1].time_to_target_s, 45);
  ReportOptions o = opts();
  o.target_accuracy = 0.88;
  const Report rep9 = analyze_runs(o, runs);
  const auto& g2 = rep9.groups.at(0);
  EXPECT_DOUBLE_EQ(*g2.rows[0].time_to_target_s, 90);
  EXPECT_FALSE(g2.rows[1].time_to_target_s);
}

TEST(ReportInput, MissingFieldNamesFileAndField) {
  json d = run_doc(1, 64, 100, 0, 90, 0, 10);
  d["step_ms"].erase("p90");
  std::string e = error_of([&] { parse_run(d, "runs/a/run.json"); });
  EXPECT_NE(e.find("runs/a/run.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'step_ms.p90'"), std::string::npos) << e;
  json d2 = run_doc(1, 64, 100, 0, 90, 0, 10);
  d2.erase("model");
  EXPECT_NE(error_of([&] { parse_run(d2, "x.json"); }).find("'model' is missing"), std::string::npos);
  json d3 = run_doc(2, 64, 100, 0, 90, 0, 10);
  d3["global_batch"] = 100;
  EXPECT_NE(error_of([&] { parse_run(d3, "x.json"); }).find("global_batch"), std::string::npos);
  json d4 = run_doc(1, 64, 100, 0, 90, 0, 10);
  d4["images_per_s"] = "fast";
  EXPECT_NE(error_of([&] { parse_run(d4, "x.json"); }).find("'images_per_s' must be a number"), std::string::npos);
}

// run.json's "gpu" object (a device model's paths and memory, docs/gpu.md) is read past:
// a run with it gives the record of the same run without it (older run.json files), and a
// gpu object of any shape is no error (the report does not use it).
TEST(ReportInput, GpuObjectIsToleratedWhateverItsShape) {
  json plain = run_doc(1, 128, 80, 0, 70, 0, 5);
  plain["device"] = "cuda:0";
  json with = plain;
  with["gpu"] = {{"bn", "cudnn"},          {"nhwc_store32", false}, {"bf16_store", true},   {"tf32_nhwc", false},
                 {"cuda_graph", false},    {"peak_memory_gib", 12.3}, {"device_used_gib", nullptr}};
  const RunRecord a = rec(plain, "a"), b = rec(with, "b");
  EXPECT_EQ(a.images_per_s, b.images_per_s);
  EXPECT_EQ(a.world_size, b.world_size);
  EXPECT_EQ(a.precision, b.precision);
  json odd = plain;
  odd["gpu"] = "not an object";
  EXPECT_EQ(error_of([&] { rec(odd, "c"); }), "(no error)");
}

// GPU ranks sharing GPUs over the host data plane (run.json gpu.ranks_per_gpu): the
// measured table counts GPUs, not ranks, and says how many ranks share each; absent or
// 1 (NCCL, older files): one GPU per rank as before.
TEST(ReportTables, RanksSharingAGpuAreNotCountedAsGpus) {
  json one = run_doc(1, 64, 80, 0, 70, 0, 5), two = run_doc(2, 64, 150, 0, 130, 10, 5);
  for (json* d : {&one, &two}) (*d)["device"] = "cuda:0", (*d)["backend"] = "mpi";
  two["gpu"] = {{"ranks_per_gpu", 2}, {"data_plane", "host"}};
  const RunRecord a = rec(one, "g1"), b = rec(two, "g2");
  EXPECT_EQ(a.ranks_per_gpu, 1);
  EXPECT_EQ(b.ranks_per_gpu, 2);
  const Report rep = analyze_runs(opts(), {a, b});
  ASSERT_EQ(rep.groups.size(), 1u);
  const TextTable t = measured_table(rep.groups[0]);
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0][2], "1 GPU");
  EXPECT_EQ(t.rows[1][2], "1 GPU (2 ranks each)");
  json nccl = two;
  nccl.erase("gpu");
  const Report rep2 = analyze_runs(opts(), {a, rec(nccl, "g3")});
  EXPECT_EQ(measured_table(rep2.groups[0]).rows[1][2], "2 GPUs");
  json bad = two;
  bad["gpu"]["ranks_per_gpu"] = "two";  // read past, as the rest of the gpu object
  EXPECT_EQ(rec(bad, "g4").ranks_per_gpu, 1);
}

TEST(ReportInput, DirectoryProblems) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("cnnscale-report-" + std::to_string(::getpid()));
  fs::create_directories(dir / "empty");
  EXPECT_NE(error_of([&] { load_run((dir / "empty").string()); }).find("has no run.json"), std::string::npos);
  EXPECT_NE(error_of([&] { load_run((dir / "nope").string()); }).find("does not exist"), std::string::npos);
  fs::create_directories(dir / "bad");
  std::ofstream((dir / "bad" / "run.json").string()) << "{\"world_size\": 2,";
  const std::string e = error_of([&] { load_run((dir / "bad").string()); });
  EXPECT_NE(e.find("malformed JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("bad/run.json"), std::string::npos) << e;
  // --allow-missing skips them when at least one run is usable.
  fs::create_directories(dir / "good");
  std::ofstream((dir / "good" / "run.json").string()) << run_doc(1, 64, 100, 0, 90, 0, 10).dump();
  ReportOptions o = opts();
  o.run_dirs = {(dir / "good").string(), (dir / "empty").string()};
  EXPECT_NE(error_of([&] { analyze(o); }).find("has no run.json"), std::string::npos);
  o.allow_missing = true;
  Report rep = analyze(o);
  EXPECT_EQ(rep.skipped.size(), 1u);
  EXPECT_EQ(rep.groups.size(), 1u);
  fs::remove_all(dir);
}

// Runs that ended early (train/run_end.hpp, issue 28 item 3): a run.json with "ended" is
// named with its last step and never a point; without run.json, metrics.jsonl and the
// lock tell killed (lock free), still running (lock held) and never started apart.
TEST(ReportInput, StoppedAndKilledRunsNamedWithTheirLastStep) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("cnnscale-report-end-" + std::to_string(::getpid()));
  fs::create_directories(dir / "stopped");
  nlohmann::json doc = run_doc(2, 64, 100, 0, 90, 0, 10);
  doc["ended"] = "signal SIGTERM at step 37";
  doc["steps"] = 37;
  doc["planned_steps"] = 1000;
  std::ofstream((dir / "stopped" / "run.json").string()) << doc.dump();
  std::string e = error_of([&] { load_run((dir / "stopped").string()); });
  EXPECT_NE(e.find("did not finish: stopped after step 37 of 1000: signal SIGTERM at step 37"), std::string::npos) << e;
  EXPECT_NE(e.find("--allow-missing"), std::string::npos) << e;
  doc["ended"] = "finished";
  std::ofstream((dir / "stopped" / "run.json").string()) << doc.dump();
  EXPECT_EQ(load_run((dir / "stopped").string()).steps, 37);  // "finished" is a finished run

  // No run.json: metrics.jsonl's last progress line, the lock's state and holder.
  fs::create_directories(dir / "killed");
  std::ofstream((dir / "killed" / "metrics.jsonl").string())
      << "{\"event\":\"start\",\"from_step\":0}\n{\"step\":10,\"loss\":1.0}\n{\"step\":20,\"loss\":0.5}\n"
      << "{\"event\":\"eval\",\"step\":20}\n{\"step\":2";  // a line cut short
  std::ofstream((dir / "killed" / "run.lock").string()) << R"({"host":"n7","pid":4242,"job_id":"99","started":"x"})";
  e = error_of([&] { load_run((dir / "killed").string()); });
  EXPECT_NE(e.find("has no run.json: killed after step 20 (metrics.jsonl's last progress line)"), std::string::npos)
      << e;
  EXPECT_NE(e.find("its last holder: pid 4242 on n7, Slurm job 99"), std::string::npos) << e;
  {
    const int fd = ::open((dir / "killed" / "run.lock").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // a training holds it
    e = error_of([&] { load_run((dir / "killed").string()); });
    EXPECT_NE(e.find("still running (pid 4242 on n7, Slurm job 99 holds run.lock), at step 20"), std::string::npos)
        << e;
    ::close(fd);
  }
  // An end line after the last start (run.json kept a finished summary elsewhere, or was lost).
  std::ofstream((dir / "killed" / "metrics.jsonl").string(), std::ios::app)
      << "\n{\"event\":\"end\",\"ended\":\"signal SIGUSR1 at step 20\",\"step\":20}\n";
  e = error_of([&] { load_run((dir / "killed").string()); });
  EXPECT_NE(e.find("ended early after step 20 (metrics.jsonl's last progress line): signal SIGUSR1 at step 20"),
            std::string::npos)
      << e;
  fs::create_directories(dir / "never");
  e = error_of([&] { load_run((dir / "never").string()); });
  EXPECT_NE(e.find("no run.json and no metrics.jsonl"), std::string::npos) << e;

  ReportOptions o = opts();
  o.run_dirs = {(dir / "stopped").string(), (dir / "killed").string()};
  o.allow_missing = true;
  Report rep = analyze(o);
  ASSERT_EQ(rep.skipped.size(), 1u);
  EXPECT_NE(rep.skipped[0].find("ended early after step 20"), std::string::npos) << rep.skipped[0];
  fs::remove_all(dir);
}

// A straggler: one rank's median compute 12 % above the median rank's gives a note that
// names the rank and both times; 3 % does not; a wrong-length list is an error.
TEST(ReportStraggler, SlowRankNamed) {
  json d = run_doc(4, 32, 100, 0, 90, 2, 3);
  d["compute_median_ms_per_rank"] = {40.0, 40.2, 44.8, 39.8};  // median 40.1; rank 2: +11.7 %
  RunRecord r = rec(d, "s4");
  auto note = straggler_note(r);
  ASSERT_TRUE(note.has_value());
  EXPECT_NE(note->find("rank 2 computes 11.7% slower"), std::string::npos) << *note;
  EXPECT_NE(note->find("44.80 vs 40.10 ms"), std::string::npos) << *note;
  // It reaches the report's notes.
  const Report rep = analyze_runs(opts(), {rec(run_doc(1, 32, 95, 0, 90, 0, 3), "s1"), r});
  bool found = false;
  for (const auto& n : rep.groups.at(0).notes) found |= n.find("rank 2 computes") != std::string::npos;
  EXPECT_TRUE(found);

  d["compute_median_ms_per_rank"] = {40.0, 40.2, 41.2, 39.8};  // +2.7 %: no note
  EXPECT_FALSE(straggler_note(rec(d, "s4")).has_value());
  d["compute_median_ms_per_rank"] = {40.0, 40.2};
  EXPECT_NE(error_of([&] { rec(d, "s4"); }).find("'compute_median_ms_per_rank' must be a list of world_size (4)"),
            std::string::npos);
}

// Efficiency above 100 %: 1 rank at 100 images/s and 2 at 250 (125 %) gives a note naming
// the row, both rates and the rerun of the baseline; 2 at 204 (102 %) does not.
TEST(ReportSuperlinear, AboveIdealNamed) {
  const Report rep = analyze_runs(opts(), {rec(run_doc(1, 32, 320, 0, 300, 0, 3), "w1"),
                                           rec(run_doc(2, 32, 256, 0, 240, 10, 3), "w2")});
  const auto& ga = rep.groups.at(0);
  ASSERT_EQ(ga.rows.size(), 2u);
  EXPECT_NEAR(ga.rows[1].efficiency, 1.25, 1e-9);
  std::string note;
  for (const auto& n : ga.notes)
    if (n.find("above 100%") != std::string::npos) note = n;
  EXPECT_NE(note.find("Parallel efficiency above 100% at 2 ranks (125.0%, 250 images/s against 100 at 1 rank(s))"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("the baseline run was slower than it should have been"), std::string::npos) << note;
  EXPECT_NE(note.find("Rerun the 1-rank baseline"), std::string::npos) << note;
  const Report ok = analyze_runs(opts(), {rec(run_doc(1, 32, 320, 0, 300, 0, 3), "w1"),
                                          rec(run_doc(2, 32, 313.7, 0, 290, 10, 3), "w2")});
  for (const auto& n : ok.groups.at(0).notes) EXPECT_EQ(n.find("above 100%"), std::string::npos) << n;
}

// Input-bound: data wait 30 % of the step gives a note naming the share, both times and
// --data-threads; 5 % does not; the threshold is a parameter; the note reaches the report.
TEST(ReportInputBound, DataWaitShareNamed) {
  json d = run_doc(2, 32, 100, 30, 60, 5, 5);  // breakdown sums to 100 ms, data 30 %
  RunRecord r = rec(d, "in2");
  auto note = input_bound_note(r);
  ASSERT_TRUE(note.has_value());
  EXPECT_NE(note->find("At 2 ranks (in2), the training loop waited for input 30.0% of the step"), std::string::npos)
      << *note;
  EXPECT_NE(note->find("30.00 of 100.0 ms"), std::string::npos) << *note;
  EXPECT_NE(note->find("--data-threads"), std::string::npos) << *note;
  const Report rep = analyze_runs(opts(), {rec(run_doc(1, 32, 95, 0, 90, 0, 5), "in1"), r});
  int found = 0;
  for (const auto& n : rep.groups.at(0).notes) found += n.find("waited for input") != std::string::npos;
  EXPECT_EQ(found, 1);  // the 1-rank run (no data wait) gets none
  EXPECT_FALSE(input_bound_note(rec(run_doc(2, 32, 100, 5, 85, 5, 5), "in2")).has_value());
  EXPECT_TRUE(input_bound_note(rec(run_doc(2, 32, 100, 5, 85, 5, 5), "in2"), 0.04).has_value());
  d["step_ms"]["mean"] = 300.0;  // the mean step, when recorded, is the denominator: 10 %, above 5 %
  EXPECT_TRUE(input_bound_note(rec(d, "in2")).has_value());
  d["step_ms"]["mean"] = 750.0;  // 4 %: not input-bound
  EXPECT_FALSE(input_bound_note(rec(d, "in2")).has_value());
  EXPECT_NE(note->find("cnnscale data-bench"), std::string::npos) << *note;
}

// The training budget (issue 29 item 1), hand-computed: strong scaling, G = 240, 4 ranks
// (1 node) at 240 ms per step = 1000 images/s, 8 ranks (2 nodes) at 150 ms = 1600 images/s
// (efficiency 0.8), 100000 train images, 2 threads per rank, 9 epochs = 900000 images:
// 4 ranks 0.25 h, 0.25 node-h, 2 core-h; 8 ranks 0.15625 h, 0.3125 node-h, 2.5 core-h.
TEST(ReportBudget, HandComputedNodeHoursChoicesAndRequest) {
  auto doc = [](int p, double step_ms) {
    json d = run_doc(p, 240 / p, step_ms, 0, step_ms * 0.9, step_ms * 0.05, step_ms * 0.05);
    d["train_samples"] = 100000;
    d["data"] = "/data/x";
    d["threads_per_rank"] = 2;
    return d;
  };
  std::vector<RunRecord> runs = {rec(doc(4, 240), "r4"), rec(doc(8, 150), "r8")};
  ReportOptions o = opts(0.8);
  o.bootstrap = 0;
  o.max_factor = 1;  // no default projections: the measured counts alone
  o.epochs = 9;
  o.node_hour_cost = 2;
  Report rep = analyze_runs(o, runs);
  ASSERT_EQ(rep.groups.size(), 1u);
  ASSERT_TRUE(rep.groups[0].budget);
  const Budget& b = *rep.groups[0].budget;
  ASSERT_EQ(b.rows.size(), 2u);
  EXPECT_EQ(b.train_samples, 100000);
  EXPECT_NEAR(b.rows[0].wall_h, 0.25, 1e-9);
  EXPECT_NEAR(b.rows[0].node_hours, 0.25, 1e-9);
  EXPECT_NEAR(b.rows[0].device_hours, 2.0, 1e-9);  // 4 ranks × 2 threads
  EXPECT_NEAR(*b.rows[0].cost, 0.5, 1e-9);
  EXPECT_NEAR(b.rows[1].wall_h, 0.15625, 1e-9);
  EXPECT_NEAR(b.rows[1].node_hours, 0.3125, 1e-9);
  EXPECT_NEAR(b.rows[1].device_hours, 2.5, 1e-9);
  // The band from the run's step spread: p10/p90 images/s = G/(1.2·T), G/(0.9·T).
  EXPECT_NEAR(*b.rows[0].wall_lo_h, 900000.0 / (240000.0 / 216) / 3600, 1e-9);
  EXPECT_NEAR(*b.rows[0].wall_hi_h, 900000.0 / (240000.0 / 288) / 3600, 1e-9);
  EXPECT_EQ(b.cheapest, std::optional<size_t>(0));        // 0.25 < 0.3125 node-hours
  EXPECT_EQ(b.fastest_within, std::optional<size_t>(1));  // efficiency 0.8 ≥ 0.8, and faster
  EXPECT_EQ(b.device_unit, "Core-hours");
  EXPECT_NE(b.request.find("for 9 epochs on 100000 images takes"), std::string::npos) << b.request;
  EXPECT_NE(b.request.find("takes 9.38 min (8.44 min–11.2 min), 1.04 min per epoch, on 2 nodes with 8 ranks: "),
            std::string::npos)
      << b.request;
  EXPECT_EQ(fmt_hours(0.5 / 3600), "0.500 s");
  EXPECT_EQ(fmt_hours(30), "30.0 h");
  EXPECT_EQ(fmt_hours(72), "3.00 d");
  EXPECT_NE(b.request.find(" node-hours (0.281–0.375) = 2.50 core-hours"), std::string::npos) << b.request;
  EXPECT_NE(b.request.find("cost 0.625 at 2 per node-hour"), std::string::npos) << b.request;
  EXPECT_NE(b.request.find("The fewest node-hours: 0.250 on 1 node, in 15.0 min"), std::string::npos) << b.request;
  // A stricter threshold: no count reaches it but 4 ranks (the base), which is then both.
  o.efficiency_threshold = 0.9;
  const Budget b9 = *analyze_runs(o, runs).groups[0].budget;
  EXPECT_EQ(b9.fastest_within, std::optional<size_t>(0));
  // The tables and report.json carry it.
  const std::string md = render_markdown(rep);
  EXPECT_NE(md.find("### Training budget"), std::string::npos);
  EXPECT_NE(md.find("[1] the fewest node-hours"), std::string::npos);
  const json data = render_json(rep);
  EXPECT_DOUBLE_EQ(data["groups"][0]["budget"]["rows"][1]["node_hours"].get<double>(), 0.3125);
  EXPECT_EQ(data["groups"][0]["budget"]["fastest_within_threshold"], 8);
  // No --epochs: no budget.
  o.epochs.reset();
  EXPECT_FALSE(analyze_runs(o, runs).groups[0].budget);
}

// --target-accuracy with runs that evaluated: the epoch each first reached it replaces
// --epochs (4 ranks: epoch 3, 8 ranks: epoch 4); synthetic runs need --train-samples.
TEST(ReportBudget, EpochsToTargetAndSyntheticData) {
  auto doc = [](int p, double step_ms, const json& curve) {
    json d = run_doc(p, 240 / p, step_ms, 0, step_ms * 0.9, step_ms * 0.05, step_ms * 0.05);
    d["train_samples"] = 100000;
    d["data"] = "/data/x";
    d["accuracy_per_epoch"] = curve;
    return d;
  };
  const json c4 = json::array(
      {{{"epoch", 1}, {"accuracy", 0.5}}, {{"epoch", 2}, {"accuracy", 0.7}}, {{"epoch", 3}, {"accuracy", 0.8}}});
  const json c8 = json::array({{{"epoch", 1}, {"accuracy", 0.4}},
                               {{"epoch", 2}, {"accuracy", 0.6}},
                               {{"epoch", 3}, {"accuracy", 0.75}},
                               {{"epoch", 4}, {"accuracy", 0.81}}});
  std::vector<RunRecord> runs = {rec(doc(4, 240, c4), "r4"), rec(doc(8, 150, c8), "r8")};
  ReportOptions o = opts(0.8);
  o.bootstrap = 0;
  o.max_factor = 1;
  o.target_accuracy = 0.8;
  const Budget b = *analyze_runs(o, runs).groups[0].budget;
  ASSERT_EQ(b.rows.size(), 2u);
  EXPECT_EQ(b.rows[0].epochs, 3);
  EXPECT_EQ(b.rows[1].epochs, 4);
  EXPECT_NEAR(b.rows[0].wall_h, 3 * 100000.0 / 1000 / 3600, 1e-9);
  EXPECT_NEAR(b.rows[1].wall_h, 4 * 100000.0 / 1600 / 3600, 1e-9);
  EXPECT_NE(b.epochs_source.find("epochs to 80.0% test accuracy"), std::string::npos) << b.epochs_source;
  // A target no run reached, without --epochs: no budget; with it, --epochs and a note.
  o.target_accuracy = 0.95;
  EXPECT_FALSE(analyze_runs(o, runs).groups[0].budget);
  // Synthetic data: the sample count is the user's to give.
  json s4 = doc(4, 240, c4), s8 = doc(8, 150, c8);
  s4["data"] = s8["data"] = "synthetic";
  std::vector<RunRecord> syn = {rec(s4, "s4"), rec(s8, "s8")};
  o.target_accuracy.reset();
  o.epochs = 90;
  const std::string e = error_of([&] { analyze_runs(o, syn); });
  EXPECT_NE(e.find("read synthetic data, so give the real data set's size with --train-samples N"), std::string::npos)
      << e;
  o.train_samples = 1281167;
  EXPECT_EQ(analyze_runs(o, syn).groups[0].budget->train_samples, 1281167);
}

// --data-bench: the reader's rate per rank against the runs' and the projections'
// consumption (hand-computed): 4 ranks measured at 1 000 images/s per rank, a reader of
// 3 000 per rank → 3× headroom; the projections at 8 (900/rank) fit, at 16 (3 200/rank,
// weak scaling with a faster step, made up) do not and are named; 1 000 images/s per
// rank at 2 500 images per CPU-second take 0.4 cores.
TEST(ReportInput, DataBenchCeilingHeadroomAndInputBoundProjections) {
  DataBench b;
  b.file = "db.json";
  b.data = "prep/imagenet";
  b.augment = "rrc224,hflip";
  b.world_size = 2;
  b.ranks_per_node = 2;
  b.data_threads = 3;
  b.images_per_s = 6000;
  b.images_per_cpu_s = 2500;
  std::vector<ScalingRow> rows(2);
  rows[0].ranks = 1;
  rows[0].images_per_s = 900;
  rows[1].ranks = 4;
  rows[1].images_per_s = 4000;
  std::vector<Projection> proj(3);
  proj[0].ranks = 8;
  proj[0].images_per_s = 7200;
  proj[1].ranks = 16;
  proj[1].images_per_s = 51200;
  proj[2].ranks = 32;
  proj[2].images_per_s = 1e6;
  proj[2].projected = false;  // not projected: not named
  const auto note = input_ceiling_note(b, rows, proj);
  ASSERT_TRUE(note);
  EXPECT_NE(note->find("the reader delivers 3000 images/s per rank. These runs consume up to 1000 per rank (at 4 "
                       "ranks): 3.00× headroom."),
            std::string::npos)
      << *note;
  EXPECT_NE(note->find("The projections at 16 (3200) ranks"), std::string::npos) << *note;
  EXPECT_EQ(note->find("at 8 ("), std::string::npos) << *note;
  EXPECT_EQ(note->find("32 ("), std::string::npos) << *note;
  EXPECT_NE(note->find("1000 images/s per rank take 0.400 core(s) per rank"), std::string::npos) << *note;
  // A run of another configuration than data-bench's is named first.
  RunRecord same, other;
  same.dir = "runs/a";
  same.data = "prep/imagenet";
  same.augment = "rrc224,hflip";
  same.data_threads = 3;
  other = same;
  other.dir = "runs/b";
  other.augment = "rrc176,hflip";
  other.data_threads = 1;
  EXPECT_EQ(input_ceiling_note(b, rows, proj, {same})->find("The run in"), std::string::npos);
  EXPECT_EQ(input_ceiling_note(b, rows, proj, {same, other})
                ->rfind("The run in runs/b used --augment rrc176,hflip (data-bench: rrc224,hflip), used "
                        "--data-threads 1 (data-bench: 3): the reader's rate below is another configuration's. Input (",
                        0),
            0u);
  rows[1].images_per_s = 16000;  // 4 000 per rank: more than the reader measured
  EXPECT_NE(input_ceiling_note(b, rows, {})->find("more than data-bench measured"), std::string::npos);
  EXPECT_FALSE(input_ceiling_note(b, {}, {}));
}
