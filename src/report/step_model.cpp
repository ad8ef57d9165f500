// step_model.cpp — fitting and projecting the per-step time model (see step_model.hpp).
#include "report/step_model.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "report/format.hpp"

namespace cnnscale::report {

double StepModel::batch_per_rank(double p) const {
  return mode == ScalingMode::strong ? global_batch0 / p : b0;
}
double StepModel::comm_ms(double p) const { return exposure * ring_allreduce_kappa_ms(p, kappa_ms, alpha_ms); }
double StepModel::step_ms(double p) const { return work_ms * batch_per_rank(p) / b0 + fixed_ms + comm_ms(p); }
double StepModel::images_per_s(double p) const { return p * batch_per_rank(p) / step_ms(p) * 1000.0; }
double StepModel::speedup(double p) const { return images_per_s(p) / images_per_s(p0); }
double StepModel::efficiency(double p) const { return speedup(p) / (p / p0); }

ModelFit fit_step_model(const RunGroup& g, const std::vector<ScalingRow>& rows, const std::optional<AlphaBeta>& bench,
                        const std::string& bench_file) {
  ModelFit fit;
  StepModel& m = fit.model;
  const ScalingRow& base = rows.front();
  m.mode = g.mode;
  m.p0 = base.ranks;
  m.b0 = static_cast<double>(base.batch_per_rank);
  m.global_batch0 = static_cast<double>(base.global_batch);
  m.work_ms = base.breakdown.data + base.breakdown.compute;
  const double rest = base.step_ms - m.work_ms - base.breakdown.comm_exposed;
  m.fixed_ms = std::max(0.0, rest);
  if (rest < 0)
    m.notes.push_back("the base run's breakdown parts add up to more than its median step time; "
                      "the non-scaling part F is taken as 0");

  m.grad_bytes = g.runs.front().grad_bytes;
  for (const auto& r : g.runs)
    if (r.grad_bytes != m.grad_bytes) {
      m.notes.push_back("the runs report different grad_bytes; the base run's value is used");
      break;
    }

  std::vector<CommPoint> pts;
  for (const auto& r : rows) pts.push_back({r.ranks, r.breakdown.comm_exposed});
  if (bench && m.grad_bytes) {
    m.alpha_ms = bench->alpha_ms;
    m.beta_bytes_per_ms = bench->beta_bytes_per_ms;
    m.kappa_ms = *m.grad_bytes / bench->beta_bytes_per_ms;
    m.comm_source = "allreduce benchmark " + bench_file;
    double syc = 0, scc = 0;
    for (const auto& pt : pts) {
      const double c = ring_allreduce_kappa_ms(pt.ranks, m.kappa_ms, m.alpha_ms);
      syc += pt.exposed_ms * c;
      scc += c * c;
    }
    m.exposure = scc > 0 ? std::max(0.0, syc / scc) : 1.0;
    if (!bench->note.empty()) m.notes.push_back(bench->note);
  } else {
    if (bench)
      m.notes.push_back("the runs do not report grad_bytes, so the benchmark's alpha and beta cannot be applied; "
                        "communication is fitted to the runs instead");
    AlphaKappa ak = fit_alpha_kappa_runs(pts);
    m.alpha_ms = ak.alpha_ms;
    m.kappa_ms = ak.kappa_ms;
    m.exposure = 1.0;
    m.comm_source = "fitted to the runs' exposed communication (effective values that include any overlap)";
    if (m.grad_bytes && ak.kappa_ms > 0) m.beta_bytes_per_ms = *m.grad_bytes / ak.kappa_ms;
    if (!ak.note.empty()) m.notes.push_back(ak.note);
  }

  double sum = 0;
  for (const auto& r : rows) {
    FitPoint fp;
    fp.ranks = r.ranks;
    fp.measured_ms = r.step_ms;
    fp.model_ms = m.step_ms(r.ranks);
    fp.rel_error = std::fabs(fp.model_ms - fp.measured_ms) / fp.measured_ms;
    sum += fp.rel_error;
    fit.max_rel_error = std::max(fit.max_rel_error, fp.rel_error);
    fit.points.push_back(fp);
  }
  fit.mean_rel_error = sum / rows.size();
  return fit;
}

std::vector<Projection> project(const StepModel& m, int largest_ranks, int ranks_per_node, int max_factor) {
  std::vector<Projection> out;
  for (int f = 2; f <= max_factor; f *= 2) {
    Projection pr;
    pr.factor = f;
    pr.ranks = largest_ranks * f;
    pr.nodes = static_cast<double>(pr.ranks) / std::max(1, ranks_per_node);
    pr.batch_per_rank = m.batch_per_rank(pr.ranks);
    pr.feasible = pr.batch_per_rank >= 1.0;
    pr.step_ms = m.step_ms(pr.ranks);
    pr.images_per_s = m.images_per_s(pr.ranks);
    pr.speedup = m.speedup(pr.ranks);
    pr.efficiency = m.efficiency(pr.ranks);
    out.push_back(pr);
  }
  return out;
}

Recommendation recommend(const std::vector<ScalingRow>& rows, const std::optional<ModelFit>& fit,
                         const std::vector<Projection>& projections, double threshold) {
  Recommendation rec;
  rec.threshold = threshold;
  rec.recommended_ranks = rows.front().ranks;
  rec.recommended_nodes = rows.front().nodes;
  rec.recommended_efficiency = rows.front().efficiency;
  for (const auto& r : rows) {
    if (r.efficiency < threshold) {
      rec.measured_below = r.ranks;
      break;
    }
    rec.recommended_ranks = r.ranks;
    rec.recommended_nodes = r.nodes;
    rec.recommended_efficiency = r.efficiency;
  }
  for (const auto& p : projections)
    if (p.efficiency < threshold) {
      rec.projected_below = p.ranks;
      break;
    }
  if (fit && !projections.empty()) {
    // Scan the model on a log grid from p0 to the last projection, then bisect the crossing.
    const StepModel& m = fit->model;
    const double lo = std::log(static_cast<double>(m.p0)), hi = std::log(static_cast<double>(projections.back().ranks));
    const int n = 400;
    double prev = lo;
    for (int i = 1; i <= n; ++i) {
      const double x = lo + (hi - lo) * i / n;
      if (m.efficiency(std::exp(x)) < threshold) {
        double a = prev, b = x;
        for (int k = 0; k < 60; ++k) {
          const double mid = 0.5 * (a + b);
          (m.efficiency(std::exp(mid)) < threshold ? b : a) = mid;
        }
        rec.crossing_ranks = std::exp(0.5 * (a + b));
        break;
      }
      prev = x;
    }
  }

  std::ostringstream os;
  os << "Recommendation: up to " << rec.recommended_ranks << " ranks (" << rec.recommended_nodes
     << (rec.recommended_nodes == 1 ? " node" : " nodes") << "), where the measured parallel efficiency is "
     << fmt_pct(rec.recommended_efficiency) << " (threshold " << fmt_pct(threshold) << ").";
  if (rec.measured_below) {
    os << " Measured efficiency already falls below the threshold at " << *rec.measured_below << " ranks.";
  } else if (rec.projected_below) {
    os << " The model projects efficiency below " << fmt_pct(threshold) << " at " << *rec.projected_below
       << " ranks";
    if (rec.crossing_ranks) os << " (crossing near " << fmt_num(*rec.crossing_ranks, 3) << " ranks)";
    os << "; this is a model projection, not a measurement.";
  } else if (!projections.empty()) {
    os << " The model projects efficiency at or above " << fmt_pct(threshold) << " up to "
       << projections.back().ranks << " ranks; this is a model projection, not a measurement.";
  }
  rec.text = os.str();
  return rec;
}

}  // namespace cnnscale::report
