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
        "comm_exposed_ms,optimizer_ms,model_step_ms,time_to_target_s\n";
  for (const auto& ga : rep.groups) {
    const auto& gr = ga.group;
    const std::string prefix = csv_field(gr.label) + "," + csv_field(gr.model) + "," + csv_field(gr.precision) + "," +
                               csv_field(gr.backend) + "," + gr.device_kind + "," + mode_name(gr.mode) + ",";
    for (const auto& r : ga.rows) {
      const auto& b = r.breakdown;
      os << prefix << "measured," << r.ranks << "," << r.nodes << "," << r.batch_per_rank << "," << r.global_batch
         << "," << g(r.images_per_s) << "," << g(r.images_per_s_p10) << "," << g(r.images_per_s_p90) << ","
         << g(r.speedup) << "," << g(r.efficiency) << "," << g(r.karp_flatt) << "," << g(r.step_ms) << ","
         << g(b.data) << "," << g(b.compute) << "," << g(b.comm_exposed) << "," << g(b.optimizer) << ","
         << (ga.fit ? g(ga.fit->model.step_ms(r.ranks)) : "") << "," << g(r.time_to_target_s) << "\n";
    }
    for (const auto& p : ga.projections)
      os << prefix << "model," << p.ranks << "," << g(p.nodes) << "," << g(p.batch_per_rank) << ","
         << g(p.batch_per_rank * p.ranks) << "," << g(p.images_per_s) << ",,," << g(p.speedup) << ","
         << g(p.efficiency) << ",," << g(p.step_ms) << ",,,,," << g(p.step_ms) << ",\n";
  }
  return os.str();
}

nlohmann::json render_json(const Report& rep) {
  using nlohmann::json;
  json out = {{"tool", "cnnscale report"}, {"efficiency_threshold", rep.options.efficiency_threshold},
              {"skipped", rep.skipped}, {"groups", json::array()}};
  if (rep.benchmark && rep.benchmark_fit)
    out["allreduce_benchmark"] = {{"file", rep.benchmark->file},
                                  {"world_size", rep.benchmark->world_size},
                                  {"alpha_us", rep.benchmark_fit->alpha_ms * 1000.0},
                                  {"beta_gbs", rep.benchmark_fit->beta_bytes_per_ms / 1e6},
                                  {"fit_mean_rel_error", rep.benchmark_fit->mean_rel_error},
                                  {"fit_max_rel_error", rep.benchmark_fit->max_rel_error}};
  for (const auto& ga : rep.groups) {
    const auto& gr = ga.group;
    json grp = {{"label", gr.label}, {"model", gr.model}, {"precision", gr.precision}, {"backend", gr.backend},
                {"device_kind", gr.device_kind}, {"mode", mode_name(gr.mode)}, {"mode_forced", gr.mode_forced},
                {"target_accuracy", j(ga.target_accuracy)}, {"scalable", ga.scalable},
                {"notes", ga.notes}, {"group_notes", gr.notes}, {"runs", json::array()}};
    for (size_t i = 0; i < ga.rows.size(); ++i) {
      const auto& r = ga.rows[i];
      grp["runs"].push_back({{"dir", gr.runs[i].dir},
                             {"ranks", r.ranks},
                             {"nodes", r.nodes},
                             {"repeats", r.repeats},
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
      json pts = json::array();
      for (const auto& p : ga.fit->points)
        pts.push_back({{"ranks", p.ranks}, {"measured_ms", p.measured_ms}, {"model_ms", p.model_ms},
                       {"rel_error", p.rel_error}});
      grp["model"] = {{"formula", "T(p) = W*b(p)/b(p0) + F + eta*(2(p-1)/p*kappa + 2(p-1)*alpha)"},
                      {"base_ranks", m.p0},
                      {"work_ms", m.work_ms},
                      {"fixed_ms", m.fixed_ms},
                      {"alpha_us", m.alpha_ms * 1000.0},
                      {"kappa_ms", m.kappa_ms},
                      {"beta_gbs", m.beta_bytes_per_ms ? json(*m.beta_bytes_per_ms / 1e6) : json(nullptr)},
                      {"grad_bytes", j(m.grad_bytes)},
                      {"exposure", m.exposure},
                      {"comm_source", m.comm_source},
                      {"notes", m.notes},
                      {"points", pts},
                      {"mean_rel_error", ga.fit->mean_rel_error},
                      {"max_rel_error", ga.fit->max_rel_error}};
      json proj = json::array();
      for (const auto& p : ga.projections)
        proj.push_back({{"ranks", p.ranks}, {"factor", p.factor}, {"nodes", p.nodes},
                        {"batch_per_rank", p.batch_per_rank}, {"feasible", p.feasible}, {"step_ms", p.step_ms},
                        {"images_per_s", p.images_per_s}, {"speedup", p.speedup}, {"efficiency", p.efficiency}});
      grp["projections"] = proj;
      grp["projection_is_model"] = true;
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
          {"crossing_ranks", j(rc.crossing_ranks)}};
    }
    out["groups"].push_back(grp);
  }
  return out;
}

}  // namespace cnnscale::report
