// budget.cpp — see budget.hpp.
#include "report/budget.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "report/format.hpp"
#include "util/error.hpp"

namespace cnnscale::report {
namespace {

// The first evaluated epoch at which the run reached `target`, if it did.
std::optional<double> epochs_to(const RunRecord& r, double target) {
  for (const auto& e : r.accuracy_per_epoch)
    if (e.accuracy >= target) return e.epoch;
  return std::nullopt;
}

std::string band(const std::optional<double>& lo, const std::optional<double>& hi, std::string (*f)(double)) {
  if (!lo || !hi) return "";
  return " (" + f(*lo) + "–" + f(*hi) + ")";
}

std::string hours_num(double h) { return fmt_num(h, 3); }

std::string plural_nodes(double n) { return fmt_count(n) + (n == 1 ? " node" : " nodes"); }

}  // namespace

std::string fmt_hours(double h) {
  if (!(h >= 0) || !std::isfinite(h)) return "?";
  if (h * 60 < 1) return fmt_num(h * 3600, 3) + " s";
  if (h < 1) return fmt_num(h * 60, 3) + " min";
  if (h < 48) return fmt_num(h, 3) + " h";
  return fmt_num(h / 24, 3) + " d";
}

std::optional<Budget> make_budget(const RunGroup& g, const std::vector<ScalingRow>& rows,
                                  const std::vector<Projection>& projections, const BudgetOptions& o) {
  if (rows.empty() || g.runs.size() != rows.size()) return std::nullopt;
  Budget b;
  // Epochs: to the target where the runs reached it, else --epochs.
  std::vector<std::optional<double>> per_row(rows.size());
  bool any_to_target = false;
  if (o.target_accuracy)
    for (size_t i = 0; i < rows.size(); ++i)
      if ((per_row[i] = epochs_to(g.runs[i], *o.target_accuracy))) any_to_target = true;
  if (!o.epochs && !any_to_target) return std::nullopt;
  if (o.epochs && !(*o.epochs > 0)) fail("--epochs must be positive, got ", *o.epochs);
  if (any_to_target) {
    b.epochs_source = "epochs to " + fmt_pct(*o.target_accuracy) +
                      " test accuracy (run.json accuracy_per_epoch; the first evaluation at or above it)";
    for (size_t i = 0; i < rows.size(); ++i)
      if (!per_row[i]) {
        if (o.epochs) {
          per_row[i] = *o.epochs;
          b.notes.push_back("The run at " + std::to_string(rows[i].ranks) + " ranks did not reach " +
                            fmt_pct(*o.target_accuracy) + ": its budget uses --epochs " + fmt_count(*o.epochs) + ".");
        } else {
          b.notes.push_back("The run at " + std::to_string(rows[i].ranks) + " ranks did not reach " +
                            fmt_pct(*o.target_accuracy) + " and no --epochs was given: it has no budget row.");
        }
      }
    for (const auto& e : per_row)  // the first run's that has a budget
      if (e) {
        b.epochs = *e;
        break;
      }
  } else {
    b.epochs = *o.epochs;
    b.epochs_source = "--epochs " + fmt_count(*o.epochs);
    for (auto& e : per_row) e = *o.epochs;
  }

  // Samples per epoch: --train-samples, else what the runs recorded (real data only).
  const RunRecord& ref = g.runs.back();
  if (o.train_samples) {
    if (*o.train_samples < 1) fail("--train-samples must be at least 1, got ", *o.train_samples);
    b.train_samples = *o.train_samples;
    b.samples_source = "--train-samples";
  } else if (ref.synthetic) {
    fail("the budget needs the number of training images: the runs of ", g.label,
         " read synthetic data, so give the real data set's size with --train-samples N (e.g. 1281167 for "
         "ImageNet-1k)");
  } else if (ref.train_samples) {
    b.train_samples = *ref.train_samples;
    b.samples_source = "run.json train_samples (the data set's train split)";
  } else {
    fail("the budget needs the number of training images and ", ref.file,
         " does not record it (written by an older cnnscale); give --train-samples N");
  }
  const bool gpu = g.device_kind == "gpu";
  b.device_unit = gpu ? "GPU-hours" : "Core-hours";
  b.node_hour_cost = o.node_hour_cost;
  b.threshold = o.efficiency_threshold;
  const int threads = ref.threads_per_rank.value_or(1);

  auto fill = [&](BudgetRow& r) {
    const double samples = r.epochs * static_cast<double>(b.train_samples);
    r.wall_h = samples / r.images_per_s / 3600.0;
    if (r.ips_lo && r.ips_hi && *r.ips_lo > 0 && *r.ips_hi > 0) {
      r.wall_lo_h = samples / *r.ips_hi / 3600.0;
      r.wall_hi_h = samples / *r.ips_lo / 3600.0;
      r.node_hours_lo = *r.wall_lo_h * r.nodes;
      r.node_hours_hi = *r.wall_hi_h * r.nodes;
    }
    r.node_hours = r.wall_h * r.nodes;
    r.device_hours = r.wall_h * r.ranks * (gpu ? 1 : threads);
    if (o.node_hour_cost) r.cost = r.node_hours * *o.node_hour_cost;
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!per_row[i]) continue;
    const ScalingRow& s = rows[i];
    BudgetRow r;
    r.ranks = s.ranks;
    r.nodes = s.nodes;
    r.epochs = *per_row[i];
    r.images_per_s = s.images_per_s;
    if (s.images_per_s_p10 > 0 && s.images_per_s_p90 > 0) {
      r.ips_lo = std::min(s.images_per_s_p10, s.images_per_s);
      r.ips_hi = std::max(s.images_per_s_p90, s.images_per_s);
    }
    r.efficiency = s.efficiency;
    fill(r);
    b.rows.push_back(r);
  }
  const double projected_epochs = per_row.back().value_or(b.epochs);
  if (any_to_target && !projections.empty())
    b.notes.push_back("Projected counts use the epochs the largest measured run (" + std::to_string(rows.back().ranks) +
                      " ranks) needed: " + fmt_count(projected_epochs) +
                      (g.mode == ScalingMode::weak ? "; under weak scaling the global batch grows with the ranks, "
                                                     "and a larger batch may need more epochs than that"
                                                   : std::string()) +
                      ".");
  for (const auto& p : projections) {
    if (!p.projected || !p.feasible || !(p.images_per_s > 0)) continue;
    BudgetRow r;
    r.ranks = p.ranks;
    r.nodes = p.layout.nodes;
    r.projected = true;
    r.epochs = projected_epochs;
    r.images_per_s = p.images_per_s;
    r.ips_lo = p.ips_lo;
    r.ips_hi = p.ips_hi;
    r.efficiency = p.efficiency;
    fill(r);
    b.rows.push_back(r);
  }
  if (b.rows.empty()) return std::nullopt;
  for (size_t i = 0; i < b.rows.size(); ++i) {
    if (!b.cheapest || b.rows[i].node_hours < b.rows[*b.cheapest].node_hours) b.cheapest = i;
    if (b.rows[i].efficiency >= o.efficiency_threshold &&
        (!b.fastest_within || b.rows[i].wall_h < b.rows[*b.fastest_within].wall_h))
      b.fastest_within = i;
  }

  // The request paragraph: the fastest count within the threshold (else the cheapest).
  const BudgetRow& k = b.rows[b.fastest_within.value_or(*b.cheapest)];
  const ScalingRow& largest = rows.back();
  std::ostringstream os;
  os << "Training " << g.model << " (" << g.precision << ", global batch " << largest.global_batch << ") for "
     << fmt_count(k.epochs) << " epochs on " << b.train_samples << " images takes " << fmt_hours(k.wall_h)
     << band(k.wall_lo_h, k.wall_hi_h, &fmt_hours) << ", " << fmt_hours(k.wall_h / k.epochs) << " per epoch, on " << plural_nodes(k.nodes) << " with " << k.ranks
     << (gpu ? " GPU" : " rank") << (k.ranks == 1 ? "" : "s") << ": " << hours_num(k.node_hours) << " node-hours"
     << band(k.node_hours_lo, k.node_hours_hi, &hours_num) << " = " << hours_num(k.device_hours) << " "
     << (gpu ? "GPU-hours" : "core-hours (ranks × threads per rank)");
  if (k.cost) os << ", cost " << fmt_num(*k.cost, 3) << " at " << fmt_count(*o.node_hour_cost) << " per node-hour";
  os << ". " << (k.projected ? "Projected" : "Measured") << " parallel efficiency there: " << fmt_pct(k.efficiency);
  if (k.projected) {
    os << " (the model fitted to the measured runs; measured at " << plural_nodes(largest.nodes) << ", "
       << largest.ranks << " ranks: " << fmt_pct(largest.efficiency) << ")";
  }
  os << "; the efficiency threshold is " << fmt_pct(o.efficiency_threshold) << ".";
  if (!b.fastest_within)
    os << " No count reaches the threshold; this is the count with the fewest node-hours.";
  else if (*b.cheapest != *b.fastest_within) {
    const BudgetRow& c = b.rows[*b.cheapest];
    os << " The fewest node-hours: " << hours_num(c.node_hours) << " on " << plural_nodes(c.nodes) << ", in "
       << fmt_hours(c.wall_h) << ".";
  }
  os << " Epochs: " << b.epochs_source << "; images per epoch: " << b.samples_source << ". From " << g.runs.size()
     << " measured run(s) at " << rows.front().ranks << "–" << largest.ranks << " ranks on " << ref.device << " ("
     << g.backend << ")";
  std::string jobs;
  for (const auto& r : g.runs)
    if (!r.slurm_job_id.empty()) jobs += (jobs.empty() ? "" : ", ") + r.slurm_job_id;
  if (!jobs.empty()) os << ", Slurm jobs " << jobs;
  os << ". The band is the measured step-time spread (measured counts) or the model's 5–95 % band (projected: "
        "run noise, the fit's misfit, leave-one-out); start-up, evaluation, checkpoints and queue time are not "
        "included.";
  b.request = os.str();
  return b;
}

}  // namespace cnnscale::report
