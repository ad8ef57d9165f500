// report_tables.cpp — see report_tables.hpp.
#include "report/report_tables.hpp"

#include <cmath>
#include <filesystem>

#include "report/format.hpp"

namespace cnnscale::report {

namespace {
// The devices a row's ranks ran on: one each, except GPU ranks sharing GPUs over the host
// data plane (run.json gpu.ranks_per_gpu), which say so: a scaling study must not read 2
// ranks on one GPU as 2 GPUs.
std::string devices(const GroupAnalysis& ga, const ScalingRow& r) {
  const bool gpu = ga.group.device_kind == "gpu";
  const int n = gpu && r.ranks_per_gpu > 1 ? (r.ranks + r.ranks_per_gpu - 1) / r.ranks_per_gpu : r.ranks;
  return std::to_string(n) + (gpu ? " GPU" : " CPU") + (n == 1 ? "" : "s") +
         (gpu && r.ranks_per_gpu > 1 ? " (" + std::to_string(r.ranks_per_gpu) + " ranks each)" : "");
}
std::string i2s(long v) { return std::to_string(v); }
}  // namespace

TextTable measured_table(const GroupAnalysis& ga) {
  TextTable t;
  // Samples that are not images (a regression's fields and volumes) are counted as samples.
  bool samples = false, tested = false;
  for (const auto& r : ga.rows) samples |= r.samples_not_images, tested |= r.test_metric.has_value();
  const std::string per_s = samples ? "Samples/s" : "Images/s";
  t.headers = {"Ranks",   "Nodes",      "Devices",    "Batch/rank", "Global", per_s,
               "p10–p90", "Speedup",    "Efficiency", "Karp–Flatt", "Step ms"};
  if (tested) t.headers.push_back("Test");
  if (ga.target_accuracy) t.headers.push_back("Time to " + fmt_pct(*ga.target_accuracy) + " (s)");
  t.notes = {"Global: the global batch. Images/s and step ms: medians over the timed steps (images/s with the "
             "slowest rank's step time); p10–p90: images/s at the 10th and 90th percentile step. Karp–Flatt: the "
             "experimentally determined serial fraction e = (1/S − 1/q)/(1 − 1/q), q = p/p0." +
             (tested ? std::string(" Test: the last evaluation of the test split (accuracy, or a regression's RMSE in "
                                   "the targets' units; run.json test_metrics has them all).")
                     : std::string()) +
             (ga.target_accuracy ? std::string(" Time to " + fmt_pct(*ga.target_accuracy) +
                                               ": seconds of training until the test accuracy first reached it.")
                                 : std::string())};
  for (const auto& r : ga.rows) {
    std::vector<std::string> row = {i2s(r.ranks) + (r.repeats > 1 ? " (" + i2s(r.repeats) + " runs)" : ""),
                                    i2s(r.nodes),
                                    devices(ga, r),
                                    i2s(r.batch_per_rank),
                                    i2s(r.global_batch),
                                    fmt_num(r.images_per_s, 4),
                                    fmt_num(r.images_per_s_p10, 4) + "–" + fmt_num(r.images_per_s_p90, 4),
                                    fmt_fixed(r.speedup, 3),
                                    fmt_pct(r.efficiency),
                                    r.karp_flatt ? fmt_fixed(*r.karp_flatt, 4) : "—",
                                    fmt_num(r.step_ms, 4)};
    if (tested) row.push_back(r.test_metric ? r.test_metric_name + " " + fmt_fixed(*r.test_metric, 4) : "—");
    if (ga.target_accuracy) row.push_back(r.time_to_target_s ? fmt_num(*r.time_to_target_s, 4) : "not reached");
    t.rows.push_back(row);
  }
  return t;
}

std::string breakdown_heading(const GroupAnalysis& ga) {
  bool all_median = true;
  for (const auto& r : ga.rows) all_median = all_median && r.breakdown_is_median;
  return all_median ? "Where the time goes (median ms per step)"
                    : "Where the time goes (ms per step: median step, mean parts)";
}

std::vector<std::string> breakdown_notes(const GroupAnalysis& ga) {
  std::vector<std::string> out;
  std::string means, negative;
  for (const auto& r : ga.rows) {
    if (!r.breakdown_is_median) means += (means.empty() ? "" : ", ") + i2s(r.ranks);
    if (r.step_ms - r.breakdown.sum() < -1e-6 * r.step_ms) negative += (negative.empty() ? "" : ", ") + i2s(r.ranks);
  }
  if (!means.empty())
    out.push_back("The run.json at " + means +
                  " rank(s) has no breakdown_median_ms (written by older cnnscale): its "
                  "parts are means over the timed steps, set against the median step.");
  if (!negative.empty())
    out.push_back("\"Other\" is negative at " + negative +
                  " rank(s): the parts' medians (each the slowest rank's, "
                  "taken separately) add up to more than the median step. It is shown as it is, not as 0.");
  return out;
}

TextTable breakdown_table(const GroupAnalysis& ga) {
  TextTable t;
  // Everything is a median when run.json has breakdown_median_ms (cnnscale train writes
  // it); "other" = median step − the parts, which can be negative (medians do not add).
  t.headers = {"Ranks", "Step (median)", "Data", "Compute", "Comm (exposed)", "Optimizer", "Other", "Comm share"};
  for (const auto& r : ga.rows) {
    const auto& b = r.breakdown;
    double other = r.step_ms - b.sum();
    if (std::fabs(other) < 1e-6 * r.step_ms) other = 0;  // rounding noise of the sum
    t.rows.push_back({i2s(r.ranks) + (r.breakdown_is_median ? "" : " (mean parts)"), fmt_num(r.step_ms, 4),
                      fmt_num(b.data, 4), fmt_num(b.compute, 4), fmt_num(b.comm_exposed, 4), fmt_num(b.optimizer, 4),
                      fmt_num(other, 3), fmt_pct(b.comm_exposed / r.step_ms)});
  }
  return t;
}

TextTable fit_table(const GroupAnalysis& ga) {
  TextTable t;
  t.headers = {"Ranks", "Nodes", "Measured step ms (median)", "Model step ms", "Relative error"};
  if (!ga.fit) return t;
  for (const auto& p : ga.fit->points)
    t.rows.push_back(
        {i2s(p.ranks), i2s(p.nodes), fmt_num(p.measured_ms, 4), fmt_num(p.model_ms, 4), fmt_pct(p.rel_error)});
  return t;
}

namespace {
std::string band(const std::optional<double>& lo, const std::optional<double>& hi, int sig = 3) {
  return lo && hi ? fmt_num(*lo, sig) + "–" + fmt_num(*hi, sig) : "—";
}
std::string pband(const std::optional<double>& lo, const std::optional<double>& hi) {
  return lo && hi ? fmt_pct(*lo) + "–" + fmt_pct(*hi) : "—";
}
// The "[k]" of a note in t.notes, added when new.
std::string note_ref(TextTable& t, const std::string& text) {
  const std::string tag = "[";
  for (size_t i = 0; i < t.notes.size(); ++i)
    if (t.notes[i].substr(t.notes[i].find(' ') + 1) == text) return tag + std::to_string(i + 1) + "]";
  t.notes.push_back(tag + std::to_string(t.notes.size() + 1) + "] " + text);
  return tag + std::to_string(t.notes.size()) + "]";
}

void param_row(TextTable& t, const std::string& name, const Param& p, double scale, const std::string& unit,
               const std::string& source) {
  std::string value, state = state_name(p.state);
  if (p.state == ParamState::unknown) {
    value = "not known";
  } else {
    value = fmt_num(p.value * scale, 4) + (unit.empty() ? "" : " " + unit);
    if (p.state == ParamState::pinned) value += " (pinned)";
    if (p.state == ParamState::clamped) value += " (clamped)";
  }
  std::string b = p.lo && p.hi ? fmt_num(*p.lo * scale, 3) + "–" + fmt_num(*p.hi * scale, 3) : "—";
  const std::string& why = p.why.empty() ? source : p.why;
  t.rows.push_back({name, value, state, b, why.empty() ? "—" : note_ref(t, why)});
}
}  // namespace

TextTable parameter_table(const GroupAnalysis& ga) {
  TextTable t;
  t.headers = {"Parameter", "Value", "How", "Band (5–95%)", "Source / why (below)"};
  if (!ga.fit) return t;
  const StepModel& m = ga.fit->model;
  const std::string runs =
      "least squares over all " + i2s(long(ga.fit->points.size())) + " counts on median step − median exposed comm";
  param_row(t, "W (data+compute at b0, per rank)", m.work_ms, 1, "ms", runs);
  param_row(t, "γ (compute growth per extra rank on a node)", m.growth, 100, "%", runs);
  param_row(t, "F (non-scaling: optimizer, other)", m.fixed_ms, 1, "ms", runs);
  param_row(t, "η (exposed share of the allreduce)", m.exposure, 1, "",
            "least squares on the runs' median exposed comm against the measured levels' cost");
  auto level = [&](const std::string& tag, const NetLevel& lv) {
    param_row(t, "α" + tag + " (latency per message step)", lv.alpha_ms, 1000, "µs", lv.source);
    param_row(t, "κ" + tag + " (grad_bytes/β per step)", lv.kappa_ms, 1, "ms", lv.source);
    if (lv.beta_gbs) param_row(t, "β" + tag + " (bandwidth)", *lv.beta_gbs, 1, "GB/s", lv.source);
  };
  level("₁ intra-node", m.intra);
  level("₂ cross-node", m.cross);
  return t;
}

TextTable projection_table(const GroupAnalysis& ga) {
  TextTable t;
  // Each value with its 5–95 % band beside it: fewer columns, so that report.md fits a
  // 120-column terminal.
  t.headers = {"Ranks", "Nodes × L", "Asked as", "Batch", "Step ms (band)", "Images/s (band)", "Speedup",
               "Efficiency (band)"};

  auto with = [](const std::string& v, const std::string& b) { return b == "—" || b.empty() ? v : v + " (" + b + ")"; };
  for (const auto& p : ga.projections) {
    const std::string layout = fmt_count(p.layout.nodes) + " × " + fmt_count(p.layout.rpn);
    const std::string batch =
        fmt_num(p.batch_per_rank, 4) +
        (p.feasible ? "" : " " + note_ref(t, "infeasible: strong scaling leaves less than one image per rank"));
    if (!p.projected) {
      t.rows.push_back({i2s(p.ranks), layout, p.origin, batch, "not projected " + note_ref(t, p.why_not), "", "", ""});
      continue;
    }
    t.rows.push_back({i2s(p.ranks), layout, p.origin, batch, with(fmt_num(p.step_ms, 4), band(p.step_lo, p.step_hi)),
                      with(fmt_num(p.images_per_s, 4), band(p.ips_lo, p.ips_hi, 3)), fmt_fixed(p.speedup, 3),
                      with(fmt_pct(p.efficiency), pband(p.eff_lo, p.eff_hi))});
  }
  t.notes.push_back("Batch: images per rank. Bands: 5–95 % over the bootstrap and leave-one-out fits (docs/report.md).");
  return t;
}

TextTable budget_table(const GroupAnalysis& ga) {
  TextTable t;
  const Budget& b = *ga.budget;
  bool one_epochs = true;  // the epochs column only when the rows differ (--target-accuracy)
  for (const auto& r : b.rows) one_epochs = one_epochs && r.epochs == b.rows.front().epochs;
  t.headers = {"Ranks", "Nodes", "Epochs", "Images/s", "Per epoch", "Wall time (band)", "Node-hours (band)",
               b.device_unit, "Efficiency", "Choice"};
  if (b.node_hour_cost) t.headers.insert(t.headers.begin() + 8, "Cost");
  for (size_t i = 0; i < b.rows.size(); ++i) {
    const BudgetRow& r = b.rows[i];
    const bool cheapest = b.cheapest && *b.cheapest == i, fastest = b.fastest_within && *b.fastest_within == i;
    const std::string choice = cheapest && fastest ? "[1] [2]" : cheapest ? "[1]" : fastest ? "[2]" : "";
    std::string wall = fmt_hours(r.wall_h), nh = fmt_num(r.node_hours, 3);
    if (r.wall_lo_h && r.wall_hi_h) wall += " (" + fmt_hours(*r.wall_lo_h) + "–" + fmt_hours(*r.wall_hi_h) + ")";
    if (r.node_hours_lo && r.node_hours_hi) nh += " (" + band(r.node_hours_lo, r.node_hours_hi, 3) + ")";
    std::vector<std::string> row = {i2s(r.ranks) + (r.projected ? " (model)" : ""),
                                    fmt_count(r.nodes),
                                    fmt_count(r.epochs),
                                    fmt_num(r.images_per_s, 4),
                                    fmt_hours(r.wall_h / r.epochs),
                                    wall,
                                    nh,
                                    fmt_num(r.device_hours, 3),
                                    fmt_pct(r.efficiency),
                                    choice};
    if (b.node_hour_cost) row.insert(row.begin() + 8, r.cost ? fmt_num(*r.cost, 4) : "—");
    if (one_epochs) row.erase(row.begin() + 2);
    t.rows.push_back(row);
  }
  if (one_epochs) t.headers.erase(t.headers.begin() + 2);
  t.notes = {"[1] the fewest node-hours", "[2] the shortest wall time at an efficiency at or above the threshold (" +
                                               fmt_pct(b.threshold) + ")"};
  return t;
}

TextTable points_table(const Report& rep, const GroupAnalysis& ga) {
  TextTable t;
  t.headers = {"Point", "Ranks", "Nodes", "Images/s", "Step ms", "This model at that layout (images/s)"};
  for (const auto& p : rep.points) {
    std::string model = "—";
    if (ga.fit && p.ranks % p.nodes == 0) {
      const Layout l{double(p.nodes), double(p.ranks / p.nodes)};
      std::string why;
      model = ga.fit->model.projectable(l, &why) ? fmt_num(ga.fit->model.images_per_s(l), 4) : why;
    }
    t.rows.push_back({p.label.empty() ? "external" : p.label, i2s(p.ranks), i2s(p.nodes), fmt_num(p.images_per_s, 4),
                      p.step_ms ? fmt_num(*p.step_ms, 4) : "—", model});
  }
  return t;
}

std::string mode_sentence(const GroupAnalysis& ga) {
  const auto& g = ga.group;
  const auto& base = ga.rows.front();
  const std::string how = g.mode_forced ? " (set by --mode)" : " (detected from the runs' batch sizes)";
  std::string s = g.mode == ScalingMode::strong
                      ? "Strong scaling" + how + ": the global batch stays at " + i2s(base.global_batch) +
                            " images, so each rank's share shrinks as ranks are added."
                      : "Weak scaling" + how + ": the per-rank batch stays at " + i2s(base.batch_per_rank) +
                            " images, so the global batch grows with the ranks; speedup is the throughput ratio.";
  s += " Speedup, efficiency and Karp–Flatt are relative to " + i2s(base.ranks) +
       (base.ranks == 1 ? " rank." : " ranks.");
  return s;
}

std::vector<std::string> model_sentences(const GroupAnalysis& ga) {
  std::vector<std::string> out;
  if (!ga.fit) return out;
  const ModelFit& f = *ga.fit;
  const StepModel& m = f.model;
  out.push_back("Per-step time model (N nodes × L ranks per node): T = W·b(p)/b0·(1 + γ(L−1)) + F + "
                "η·[2(L−1)/L·κ₁ + 2(L−1)·α₁] + η·[2(N−1)/N·κ₂/L + 2(N−1)·α₂], the hierarchical sum training does "
                "(node-local shared memory, then the ranks of equal local rank across nodes). η applies to "
                "the levels measured by allreduce; a level fitted to the runs' exposed comm is effective (η folded "
                "in). Base: " +
                i2s(m.p0) + (m.p0 == 1 ? " rank" : " ranks") + ", b0 = " + fmt_num(m.b0, 4) + " images per rank.");
  long free_compute = 0;
  for (const Param* p : {&m.work_ms, &m.growth, &m.fixed_ms}) free_compute += p->state == ParamState::fitted;
  std::string fe = "Fit error over the " + i2s(long(f.points.size())) + " points fitted (every measured count): mean " +
                   fmt_pct(f.mean_rel_error) + ", max " + fmt_pct(f.max_rel_error) + ".";
  if (free_compute >= long(f.points.size()))
    fe += " It is exact by construction (" + i2s(long(f.points.size())) + " points, " + i2s(free_compute) +
          " compute parameters fitted): the fit error says nothing about the model; the hold-out does.";
  out.push_back(fe);
  if (f.holdout) {
    const auto& h = *f.holdout;
    if (h.rel_error)
      out.push_back("Hold-out: fitted on all but the largest count, the model predicts " + fmt_num(*h.predicted_ms, 4) +
                    " ms at " + i2s(h.ranks) + " ranks (" + i2s(h.nodes) + (h.nodes == 1 ? " node" : " nodes") +
                    ") against " + fmt_num(h.measured_ms, 4) + " ms measured: error " + (*h.rel_error >= 0 ? "+" : "") +
                    fmt_pct(*h.rel_error) +
                    ". Expect projections beyond the "
                    "measured counts to be no better than this.");
    else
      out.push_back("Hold-out at " + i2s(h.ranks) + " ranks: " + h.why_not +
                    " in the fit without it, so the largest count cannot be predicted from the smaller ones.");
  } else {
    out.push_back("Hold-out: not done (needs ≥ 3 rank counts).");
  }
  if (f.bootstrap_replicates > 0)
    out.push_back("Bands: " + i2s(f.bootstrap_replicates) + " replicates of a " + f.bootstrap_method + ".");
  for (const auto& n : m.notes) out.push_back("Note: " + n + ".");
  return out;
}

std::vector<std::string> benchmark_sentences(const Report& rep) {
  std::vector<std::string> out;
  for (const auto& b : rep.benchmarks) {
    const char* lv = b.kind() == NetLevelKind::intra   ? "intra-node level"
                     : b.kind() == NetLevelKind::cross ? "cross-node level"
                                                       : "not used";
    std::string s = "Allreduce measurement " + b.file + ": " + i2s(b.world_size) + " ranks in the sum, launch " +
                    i2s(b.nodes) + " node(s) × " + i2s(b.ranks_per_node) + ", --level " + b.level + " → " + lv;
    if (b.kind() != NetLevelKind::unusable) {
      const AlphaBeta f = fit_alpha_beta_benchmark(b);
      s += ": α = " + fmt_num(f.alpha_ms * 1000.0, 4) + " µs, β = " + fmt_num(f.beta_bytes_per_ms / 1e6, 4) +
           " GB/s on its own (fit error mean " + fmt_pct(f.mean_rel_error) + ", max " + fmt_pct(f.max_rel_error) + ")" +
           (f.note.empty() ? "" : "; " + f.note);
    }
    out.push_back(s + ".");
  }
  for (const auto& n : rep.benchmark_notes) out.push_back("Note: " + n);
  return out;
}

std::vector<TimelineLink> timeline_links(const Report& rep) {
  std::vector<TimelineLink> out;
  for (const auto& ga : rep.groups)
    for (const auto& r : ga.group.runs)
      if (!r.timeline.empty()) {
        std::error_code ec;
        out.push_back({r.dir, r.timeline, r.world_size, std::filesystem::is_regular_file(r.timeline, ec)});
      }
  return out;
}

std::string timeline_sentence(const TimelineLink& t) {
  return "Step timeline of " + t.dir + " (" + i2s(t.ranks) + (t.ranks == 1 ? " rank" : " ranks") + "): " + t.path +
         (t.exists ? " — open it in https://ui.perfetto.dev or chrome://tracing." : " (not found now).");
}

}  // namespace cnnscale::report
