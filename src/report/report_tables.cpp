// report_tables.cpp — see report_tables.hpp.
#include "report/report_tables.hpp"

#include <cmath>

#include "report/format.hpp"

namespace cnnscale::report {

namespace {
std::string devices(const GroupAnalysis& ga, int ranks) {
  return std::to_string(ranks) + (ga.group.device_kind == "gpu" ? " GPU" : " CPU") + (ranks == 1 ? "" : "s");
}
std::string i2s(long v) { return std::to_string(v); }
}  // namespace

TextTable measured_table(const GroupAnalysis& ga) {
  TextTable t;
  t.headers = {"Ranks", "Nodes", "Devices", "Batch/rank", "Global batch", "Images/s (median)", "Images/s p10–p90",
               "Speedup", "Efficiency", "Karp–Flatt e", "Step ms (median)"};
  if (ga.target_accuracy) t.headers.push_back("Time to " + fmt_pct(*ga.target_accuracy) + " acc. (s)");
  for (const auto& r : ga.rows) {
    std::vector<std::string> row = {
        i2s(r.ranks) + (r.repeats > 1 ? " (" + i2s(r.repeats) + " runs)" : ""), i2s(r.nodes), devices(ga, r.ranks),
        i2s(r.batch_per_rank), i2s(r.global_batch), fmt_num(r.images_per_s, 4),
        fmt_num(r.images_per_s_p10, 4) + "–" + fmt_num(r.images_per_s_p90, 4), fmt_fixed(r.speedup, 3),
        fmt_pct(r.efficiency), r.karp_flatt ? fmt_fixed(*r.karp_flatt, 4) : "—", fmt_num(r.step_ms, 4)};
    if (ga.target_accuracy) row.push_back(r.time_to_target_s ? fmt_num(*r.time_to_target_s, 4) : "not reached");
    t.rows.push_back(row);
  }
  return t;
}

TextTable breakdown_table(const GroupAnalysis& ga) {
  TextTable t;
  // The components are means over the timed steps, so they are set against the mean
  // step (run.json step_ms.mean; the median when a run does not give it).
  t.headers = {"Ranks", "Step (mean)", "Data", "Compute", "Comm (exposed)", "Optimizer", "Other", "Comm share"};
  for (const auto& r : ga.rows) {
    const auto& b = r.breakdown;
    double other = r.step_mean_ms - b.sum();
    if (std::fabs(other) < 1e-6 * r.step_mean_ms) other = 0;  // rounding noise of the sum
    t.rows.push_back({i2s(r.ranks), fmt_num(r.step_mean_ms, 4), fmt_num(b.data, 4), fmt_num(b.compute, 4),
                      fmt_num(b.comm_exposed, 4), fmt_num(b.optimizer, 4), fmt_num(other, 3),
                      fmt_pct(b.comm_exposed / r.step_mean_ms)});
  }
  return t;
}

TextTable fit_table(const GroupAnalysis& ga) {
  TextTable t;
  t.headers = {"Ranks", "Measured step ms", "Model step ms", "Relative error"};
  if (!ga.fit) return t;
  for (const auto& p : ga.fit->points)
    t.rows.push_back({i2s(p.ranks), fmt_num(p.measured_ms, 4), fmt_num(p.model_ms, 4), fmt_pct(p.rel_error)});
  return t;
}

TextTable projection_table(const GroupAnalysis& ga) {
  TextTable t;
  t.headers = {"Ranks (model)", "× largest measured", "Nodes", "Batch/rank", "Step ms", "Images/s", "Speedup",
               "Efficiency"};
  for (const auto& p : ga.projections)
    t.rows.push_back({i2s(p.ranks), i2s(p.factor) + "×", fmt_count(p.nodes),
                      fmt_num(p.batch_per_rank, 4) + (p.feasible ? "" : " (< 1: infeasible)"), fmt_num(p.step_ms, 4),
                      fmt_num(p.images_per_s, 4), fmt_fixed(p.speedup, 3), fmt_pct(p.efficiency)});
  return t;
}

std::string mode_sentence(const GroupAnalysis& ga) {
  const auto& g = ga.group;
  const auto& base = ga.rows.front();
  std::string s = g.mode == ScalingMode::strong
                      ? "Strong scaling: the global batch stays at " + i2s(base.global_batch) +
                            " images, so each rank's share shrinks as ranks are added."
                      : "Weak scaling: the per-rank batch stays at " + i2s(base.batch_per_rank) +
                            " images, so the global batch grows with the ranks; speedup is the throughput ratio.";
  s += g.mode_forced ? " (set by --mode)" : " (detected)";
  s += " Speedup, efficiency and Karp–Flatt are relative to " + i2s(base.ranks) + (base.ranks == 1 ? " rank." : " ranks.");
  return s;
}

std::vector<std::string> model_sentences(const GroupAnalysis& ga) {
  std::vector<std::string> out;
  if (!ga.fit) return out;
  const StepModel& m = ga.fit->model;
  out.push_back("Per-step time model: T(p) = W·b(p)/b(p0) + F + η·[2(p−1)/p·κ + 2(p−1)·α] with W = " +
                fmt_num(m.work_ms, 4) + " ms (data + compute at " + i2s(m.p0) + (m.p0 == 1 ? " rank), F = " : " ranks), F = ") +
                fmt_num(m.fixed_ms, 4) + " ms (optimizer and other non-scaling time).");
  std::string comm = "Communication, " + m.comm_source + ": α = " + fmt_num(m.alpha_ms * 1000.0, 4) +
                     " µs per message step, κ = grad_bytes/β = " + fmt_num(m.kappa_ms, 4) + " ms";
  if (m.grad_bytes) comm += " for " + fmt_num(*m.grad_bytes / 1e6, 4) + " MB of gradients";
  if (m.beta_bytes_per_ms) comm += ", β = " + fmt_num(*m.beta_bytes_per_ms / 1e6, 4) + " GB/s";
  comm += ", exposed fraction η = " + fmt_num(m.exposure, 3) + ".";
  out.push_back(comm);
  out.push_back("Fit error on the " + i2s(static_cast<long>(ga.fit->points.size())) +
                " measured points: mean " + fmt_pct(ga.fit->mean_rel_error) + ", max " +
                fmt_pct(ga.fit->max_rel_error) + ".");
  for (const auto& n : m.notes) out.push_back("Note: " + n + ".");
  return out;
}

std::string benchmark_sentence(const Report& rep) {
  if (!rep.benchmark || !rep.benchmark_fit) return "";
  const auto& b = *rep.benchmark;
  const auto& f = *rep.benchmark_fit;
  return "Allreduce benchmark " + b.file + " (" + i2s(b.world_size) + " ranks" +
         (b.backend.empty() ? "" : ", " + b.backend) + ", " + i2s(static_cast<long>(b.rows.size())) +
         " sizes): α = " + fmt_num(f.alpha_ms * 1000.0, 4) + " µs, β = " + fmt_num(f.beta_bytes_per_ms / 1e6, 4) +
         " GB/s; fit error mean " + fmt_pct(f.mean_rel_error) + ", max " + fmt_pct(f.max_rel_error) + "." +
         (f.note.empty() ? "" : " Note: " + f.note + ".");
}

}  // namespace cnnscale::report
