// render_data.cpp — the machine-readable outputs: scaling.csv (one row per measured
// rank count, source=measured, and per projected count, source=model) and report.json
// (everything in the report, full precision).
#include <cstdio>
#include <sstream>

#include "report/format.hpp"
#include "report/renderers.hpp"

namespace cnnscale::report {

namespace {

std::string g(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}
std::string g(const std::optional<double>& v) { return v ? g(*v) : ""; }
nlohmann::json j(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

std::string render_csv(const Report& rep) {
  std::ostringstream os;
  os << "group,model,precision,backend,device,mode,source,ranks,nodes,batch_per_rank,global_batch,images_per_s,"
        "images_per_s_p10,images_per_s_p90,speedup,efficiency,karp_flatt,step_ms,data_ms,compute_ms,"
        "comm_exposed_ms,optimizer_ms,model_step_ms,time_to_target_s,ranks_per_node,projected,step_ms_lo,step_ms_hi,"
        "efficiency_lo,efficiency_hi\n";
  for (const auto& ga : rep.groups) {
    const auto& gr = ga.group;
    const std::string prefix = csv_field(gr.label) + "," + csv_field(gr.model) + "," + csv_field(gr.precision) + "," +
                               csv_field(gr.backend) + "," + gr.device_kind + "," + mode_name(gr.mode) + ",";
    for (const auto& r : ga.rows) {
      const auto& b = r.breakdown;
      os << prefix << "measured," << r.ranks << "," << r.nodes << "," << r.batch_per_rank << "," << r.global_batch
         << "," << g(r.images_per_s) << "," << g(r.images_per_s_p10) << "," << g(r.images_per_s_p90) << ","
         << g(r.speedup) << "," << g(r.efficiency) << "," << g(r.karp_flatt) << "," << g(r.step_ms) << "," << g(b.data)
         << "," << g(b.compute) << "," << g(b.comm_exposed) << "," << g(b.optimizer) << ","
         << (ga.fit ? g(ga.fit->model.step_ms({double(r.nodes), double(r.ranks_per_node)})) : "") << ","
         << g(r.time_to_target_s) << "," << r.ranks_per_node << ",,,,,\n";
    }
    for (const auto& p : ga.projections) {
      os << prefix << "model," << p.ranks << "," << g(p.layout.nodes) << "," << g(p.batch_per_rank) << ","
         << g(p.batch_per_rank * p.ranks) << ",";
      if (p.projected)
        os << g(p.images_per_s) << ",,," << g(p.speedup) << "," << g(p.efficiency) << ",," << g(p.step_ms) << ",,,,,"
           << g(p.step_ms) << ",," << g(p.layout.rpn) << ",1," << g(p.step_lo) << "," << g(p.step_hi) << ","
           << g(p.eff_lo) << "," << g(p.eff_hi) << "\n";
      else os << ",,,,,,,,,,,,,," << g(p.layout.rpn) << ",0,,,,\n";
    }
    for (const auto& p : rep.points)
      os << prefix << "external," << p.ranks << "," << p.nodes << ",,," << g(p.images_per_s) << ",,,,,," << g(p.step_ms)
         << ",,,,,,," << (p.ranks % p.nodes == 0 ? std::to_string(p.ranks / p.nodes) : "") << ",,,,,\n";
  }
  return os.str();
}

nlohmann::json render_json(const Report& rep) {
  using nlohmann::json;
  json out = {{"tool", "cnnscale report"},
              {"efficiency_threshold", rep.options.efficiency_threshold},
              {"skipped", rep.skipped},
              {"groups", json::array()}};
  out["allreduce_measurements"] = json::array();
  for (const auto& b : rep.benchmarks) {
    json e = {{"file", b.file},
              {"world_size", b.world_size},
              {"nodes", b.nodes},
              {"ranks_per_node", b.ranks_per_node},
              {"level", b.level},
              {"used_as", b.kind() == NetLevelKind::intra   ? "intra"
                          : b.kind() == NetLevelKind::cross ? "cross"
                                                            : "unused"}};
    if (b.kind() != NetLevelKind::unusable) {
      const AlphaBeta f = fit_alpha_beta_benchmark(b);
      e["alpha_us"] = f.alpha_ms * 1000.0;
      e["beta_gbs"] = f.beta_bytes_per_ms / 1e6;
      e["fit_mean_rel_error"] = f.mean_rel_error;
      e["fit_max_rel_error"] = f.max_rel_error;
    }
    out["allreduce_measurements"].push_back(e);
  }
  out["points"] = json::array();
  for (const auto& p : rep.points)
    out["points"].push_back({{"ranks", p.ranks},
                             {"nodes", p.nodes},
                             {"images_per_s", p.images_per_s},
                             {"step_ms", j(p.step_ms)},
                             {"label", p.label}});
  for (const auto& ga : rep.groups) {
    const auto& gr = ga.group;
    json grp = {{"label", gr.label},
                {"model", gr.model},
                {"precision", gr.precision},
                {"backend", gr.backend},
                {"device_kind", gr.device_kind},
                {"mode", mode_name(gr.mode)},
                {"mode_forced", gr.mode_forced},
                {"target_accuracy", j(ga.target_accuracy)},
                {"scalable", ga.scalable},
                {"notes", ga.notes},
                {"group_notes", gr.notes},
                {"runs", json::array()}};
    for (size_t i = 0; i < ga.rows.size(); ++i) {
      const auto& r = ga.rows[i];
      grp["runs"].push_back({{"dir", gr.runs[i].dir},
                             {"timeline", gr.runs[i].timeline.empty() ? json(nullptr) : json(gr.runs[i].timeline)},
                             {"ranks", r.ranks},
                             {"nodes", r.nodes},
                             {"ranks_per_node", r.ranks_per_node},
                             {"repeats", r.repeats},
                             {"breakdown_is_median", r.breakdown_is_median},
                             {"batch_per_rank", r.batch_per_rank},
                             {"global_batch", r.global_batch},
                             {"images_per_s", r.images_per_s},
                             {"images_per_s_p10", r.images_per_s_p10},
                             {"images_per_s_p90", r.images_per_s_p90},
                             {"speedup", r.speedup},
                             {"efficiency", r.efficiency},
                             {"karp_flatt", j(r.karp_flatt)},
                             {"step_ms", r.step_ms},
                             {"breakdown_ms",
                              {{"data", r.breakdown.data},
                               {"compute", r.breakdown.compute},
                               {"comm_exposed", r.breakdown.comm_exposed},
                               {"optimizer", r.breakdown.optimizer}}},
                             {"test_accuracy", j(r.test_accuracy)},
                             {"time_to_target_s", j(r.time_to_target_s)}});
    }
    if (ga.fit) {
      const auto& m = ga.fit->model;
      auto param = [](const Param& p, double scale) {
        json o = {{"value", p.state == ParamState::unknown ? json(nullptr) : json(p.value * scale)},
                  {"state", state_name(p.state)},
                  {"why", p.why}};
        o["lo"] = p.lo ? json(*p.lo * scale) : json(nullptr);
        o["hi"] = p.hi ? json(*p.hi * scale) : json(nullptr);
        return o;
      };
      auto level = [&](const NetLevel& lv) {
        json o = {{"alpha_us", param(lv.alpha_ms, 1000.0)},
                  {"kappa_ms", param(lv.kappa_ms, 1.0)},
                  {"source", lv.source},
                  {"known", lv.known()}};
        o["beta_gbs"] = lv.beta_gbs ? param(*lv.beta_gbs, 1.0) : json(nullptr);
        return o;
      };
      json pts = json::array();
      for (const auto& p : ga.fit->points)
        pts.push_back({{"ranks", p.ranks},
                       {"nodes", p.nodes},
                       {"measured_ms", p.measured_ms},
                       {"model_ms", p.model_ms},
                       {"rel_error", p.rel_error}});
      grp["model"] = {
          {"formula",
           "T = W*b(p)/b0*(1+gamma*(L-1)) + F + eta*(2(L-1)/L*kappa1 + 2(L-1)*alpha1) + eta*(2(N-1)/N*kappa2/L + "
           "2(N-1)*alpha2)"},
          {"base_ranks", m.p0},
          {"work_ms", param(m.work_ms, 1.0)},
          {"growth", param(m.growth, 1.0)},
          {"fixed_ms", param(m.fixed_ms, 1.0)},
          {"exposure", param(m.exposure, 1.0)},
          {"intra", level(m.intra)},
          {"cross", level(m.cross)},
          {"grad_bytes", j(m.grad_bytes)},
          {"notes", m.notes},
          {"points", pts},
          {"mean_rel_error", ga.fit->mean_rel_error},
          {"max_rel_error", ga.fit->max_rel_error},
          {"bootstrap_replicates", ga.fit->bootstrap_replicates},
          {"bootstrap_method", ga.fit->bootstrap_method}};
      if (ga.fit->holdout) {
        const auto& h = *ga.fit->holdout;
        grp["model"]["holdout"] = {{"ranks", h.ranks},
                                   {"nodes", h.nodes},
                                   {"measured_ms", h.measured_ms},
                                   {"predicted_ms", j(h.predicted_ms)},
                                   {"rel_error", j(h.rel_error)},
                                   {"why_not", h.why_not}};
      }
      json proj = json::array();
      for (const auto& p : ga.projections) {
        json e = {{"ranks", p.ranks},
                  {"nodes", p.layout.nodes},
                  {"ranks_per_node", p.layout.rpn},
                  {"origin", p.origin},
                  {"projected", p.projected},
                  {"why_not", p.why_not},
                  {"batch_per_rank", p.batch_per_rank},
                  {"feasible", p.feasible}};
        if (p.projected) {
          e["step_ms"] = p.step_ms;
          e["images_per_s"] = p.images_per_s;
          e["speedup"] = p.speedup;
          e["efficiency"] = p.efficiency;
          e["step_ms_band"] = {j(p.step_lo), j(p.step_hi)};
          e["images_per_s_band"] = {j(p.ips_lo), j(p.ips_hi)};
          e["efficiency_band"] = {j(p.eff_lo), j(p.eff_hi)};
        }
        proj.push_back(e);
      }
      grp["projections"] = proj;
      grp["projection_is_model"] = true;
    }
    if (ga.budget) {
      const Budget& b = *ga.budget;
      json rows = json::array();
      for (const auto& r : b.rows)
        rows.push_back({{"ranks", r.ranks},
                        {"nodes", r.nodes},
                        {"projected", r.projected},
                        {"epochs", r.epochs},
                        {"images_per_s", r.images_per_s},
                        {"images_per_s_lo", j(r.ips_lo)},
                        {"images_per_s_hi", j(r.ips_hi)},
                        {"efficiency", r.efficiency},
                        {"epoch_hours", r.wall_h / r.epochs},
                        {"wall_hours", r.wall_h},
                        {"wall_hours_lo", j(r.wall_lo_h)},
                        {"wall_hours_hi", j(r.wall_hi_h)},
                        {"node_hours", r.node_hours},
                        {"node_hours_lo", j(r.node_hours_lo)},
                        {"node_hours_hi", j(r.node_hours_hi)},
                        {"device_hours", r.device_hours},
                        {"cost", j(r.cost)}});
      grp["budget"] = {{"epochs", b.epochs},
                       {"epochs_source", b.epochs_source},
                       {"train_samples", b.train_samples},
                       {"samples_source", b.samples_source},
                       {"device_unit", b.device_unit},
                       {"node_hour_cost", j(b.node_hour_cost)},
                       {"rows", rows},
                       {"cheapest", b.cheapest ? json(b.rows[*b.cheapest].ranks) : json(nullptr)},
                       {"fastest_within_threshold", b.fastest_within ? json(b.rows[*b.fastest_within].ranks) : json(nullptr)},
                       {"request", b.request},
                       {"notes", b.notes}};
    }
    if (ga.recommendation) {
      const auto& rc = *ga.recommendation;
      grp["recommendation"] = {
          {"text", rc.text},
          {"threshold", rc.threshold},
          {"recommended_ranks", rc.recommended_ranks},
          {"recommended_nodes", rc.recommended_nodes},
          {"recommended_efficiency", rc.recommended_efficiency},
          {"measured_below", rc.measured_below ? json(*rc.measured_below) : json(nullptr)},
          {"projected_below", rc.projected_below ? json(*rc.projected_below) : json(nullptr)},
          {"crossing_ranks", j(rc.crossing_ranks)},
          {"not_projected_from", rc.not_projected_from ? json(*rc.not_projected_from) : json(nullptr)}};
    }
    out["groups"].push_back(grp);
  }
  return out;
}

std::string render_json_text(const Report& rep) {
  return render_json(rep).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace cnnscale::report
