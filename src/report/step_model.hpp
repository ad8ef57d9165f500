// step_model.hpp — StepModel: per-step time as a function of the layout (N nodes × L
// ranks per node, p = N·L ranks), for the hierarchical gradient sum cnnscale does
// (comm/shm_allreduce.hpp: node-local reduce-scatter/all-gather, then an allreduce of
// each 1/L slice among the ranks of equal local rank across nodes):
//
//   T(N, L) = W·b(p)/b0·(1 + γ·(L−1)) + F                                compute + fixed
//           + η·[ 2(L−1)/L·κ₁ + 2(L−1)·α₁ ]                              intra-node level
//           + η·[ 2(N−1)/N·κ₂/L + 2(N−1)·α₂ ]                            cross-node level
//
// b(p) = the per-rank batch (strong: G/p; weak: constant), b0 the base run's; γ the growth
// of per-image compute time per extra rank on a node (memory bandwidth and caches shared);
// κ = grad_bytes/β of each level (ms per step). Why two levels: the issue-15 demo fitted one
// β to a single-node run and projected it to 64 nodes; relabelling 2 ranks on 1 node as 2
// nodes changed nothing. A level without a run or an allreduce measurement that covers it
// is unknown, and layouts needing it are not projected.
//
// The fit (all least squares over every rank count, on medians):
//   W, γ, F  on step − exposed comm (run.json step_ms.median minus the exposed-comm median);
//   α₁, κ₁, α₂, κ₂  from `cnnscale allreduce --json` measurements of that level when given
//            (then η, the exposed share, is fitted to the runs' exposed comm), else fitted to
//            the runs' exposed comm directly (effective values: η is folded in and is not
//            applied to that level again).
// A parameter the input cannot identify is pinned and labelled (Param::state), never
// printed as a fit. Uncertainty: a bootstrap (see fit_step_model).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "report/alpha_beta.hpp"
#include "report/grouping.hpp"
#include "report/scaling_table.hpp"

namespace cnnscale::report {

enum class ParamState {
  fitted,    // least squares over the runs
  measured,  // from allreduce benchmark(s)
  pinned,    // not identifiable from the input: held at `value`, `why` says so
  clamped,   // the fit went negative and it was held at 0
  unknown,   // nothing in the input covers it: layouts needing it are not projected
};
const char* state_name(ParamState s);

struct Param {
  double value = 0;
  ParamState state = ParamState::fitted;
  std::string why;
  std::optional<double> lo, hi;  // bootstrap 5th–95th percentile
  bool usable() const { return state != ParamState::unknown; }
};

struct Layout {
  double nodes = 1, rpn = 1;
  double ranks() const { return nodes * rpn; }
};

struct NetLevel {
  Param alpha_ms, kappa_ms;       // latency per message step; grad_bytes/β per step
  std::optional<Param> beta_gbs;  // β in GB/s when grad_bytes is known
  std::string source;             // "allreduce --level cross: FILES" / "fitted to the runs' exposed comm" / ""
  bool effective = false;         // fitted to the runs' exposed comm: η is already in α, κ (not applied again)
  bool known() const { return kappa_ms.usable(); }
  double cost_ms(double p_level, double slice) const;  // ring over p_level ranks of grad/slice bytes
};

struct StepModel {
  ScalingMode mode = ScalingMode::strong;
  int p0 = 1;
  double b0 = 1, global_batch0 = 1;
  Layout base;
  Param work_ms, growth, fixed_ms, exposure;
  NetLevel intra, cross;
  std::optional<double> grad_bytes;
  std::vector<std::string> notes;

  double batch_per_rank(double p) const;
  double compute_ms(const Layout& l) const;  // W·b/b0·(1+γ(L−1)) + F
  double comm_ms(const Layout& l) const;     // η·(intra + cross)
  double step_ms(const Layout& l) const;
  double images_per_s(const Layout& l) const;
  double speedup(const Layout& l) const;     // X(l)/X(base), model on both sides
  double efficiency(const Layout& l) const;  // speedup / (p/p0)
  // False (and *why) when the layout needs a network level nothing measured.
  bool projectable(const Layout& l, std::string* why = nullptr) const;
};

struct FitPoint {
  int ranks = 1, nodes = 1;
  double measured_ms = 0, model_ms = 0, rel_error = 0;
};

struct HoldOut {
  int ranks = 0, nodes = 0;
  double measured_ms = 0;
  std::optional<double> predicted_ms, rel_error;  // none when the smaller fit cannot project there
  std::string why_not;
};

struct ModelFit {
  StepModel model;
  std::vector<FitPoint> points;  // every point fitted (all rank counts)
  double mean_rel_error = 0, max_rel_error = 0;
  std::optional<HoldOut> holdout;  // ≥ 3 counts: fit on all but the largest, predict it
  int bootstrap_replicates = 0;
  std::string bootstrap_method;
  // The fit's misfit the bands include (fit_step_model): residual σ relative to the step
  // time of the compute part and of the exposed comm (t-widened), over their degrees of
  // freedom (≤ 0: that part fits exactly and its misfit is unknown).
  double misfit_sigma_compute = 0, misfit_sigma_comm = 0;
  int misfit_dof_compute = 0, misfit_dof_comm = 0;
  std::vector<StepModel> replicates;  // the bootstrap's models (for bands)
  std::vector<StepModel> leave_one_out;  // ≥ 4 counts: refitted without each count (projection bands cover them)
};

// The allreduce measurements, sorted by level.
struct NetMeasurements {
  std::vector<const AllreduceBenchmark*> intra, cross;
};

// Fits the model to a group's rows (≥ 2 rank counts) and, with `bootstrap` > 0, that
// many bootstrap replicates (seeded, so a report is reproducible) and the hold-out.
ModelFit fit_step_model(const RunGroup& g, const std::vector<ScalingRow>& rows, const NetMeasurements& net,
                        int bootstrap = 200);

struct Projection {
  Layout layout;
  int ranks = 0;
  std::string origin;     // "2×" (of the largest measured count) or "--project"
  bool projected = true;  // false: a network level is unknown (why_not)
  std::string why_not;
  double batch_per_rank = 0;
  bool feasible = true;  // false when the per-rank batch would drop below 1 (strong)
  double step_ms = 0, images_per_s = 0, speedup = 0, efficiency = 0;
  std::optional<double> step_lo, step_hi, ips_lo, ips_hi, eff_lo, eff_hi;  // bootstrap 5–95 %
};

// One projection at a layout (bands from the fit's replicates).
Projection project_layout(const ModelFit& fit, const Layout& l, const std::string& origin);

// Default projections: 2×, 4×, … max_factor× the largest measured count at its ranks per
// node (nodes = ranks / ranks per node), then the `extra` layouts (--project).
std::vector<Projection> project(const ModelFit& fit, const Layout& largest, int max_factor,
                                const std::vector<Layout>& extra = {});

// Parses --project: comma-separated "R" (R ranks at `rpn` ranks per node) or "NxL"
// (N nodes × L ranks per node). UserError naming the bad item.
std::vector<Layout> parse_layouts(const std::string& text, int rpn);

struct Recommendation {
  double threshold = 0.8;
  int recommended_ranks = 0;  // largest measured count with E ≥ threshold (and all smaller counts too)
  int recommended_nodes = 0;
  double recommended_efficiency = 1;
  std::optional<int> measured_below;      // first measured count with E < threshold
  std::optional<int> projected_below;     // first projected count with E < threshold
  std::optional<double> crossing_ranks;   // model: rank count where E = threshold (projectable layouts only)
  std::optional<int> not_projected_from;  // first default count left out (unknown network level)
  std::string text;                       // the one-line recommendation
};

Recommendation recommend(const std::vector<ScalingRow>& rows, const std::optional<ModelFit>& fit,
                         const std::vector<Projection>& projections, double threshold);

}  // namespace cnnscale::report
