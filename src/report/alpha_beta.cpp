// alpha_beta.cpp — α–β ring allreduce model and fits (see alpha_beta.hpp).
#include "report/alpha_beta.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "report/json_file.hpp"
#include "report/plausible.hpp"
#include "util/error.hpp"

namespace cnnscale::report {

RingCoefficients ring_allreduce_coefficients(double p) {
  if (p <= 1) return {};
  return {2.0 * (p - 1), 2.0 * (p - 1) / p};
}

double ring_allreduce_kappa_ms(double p, double kappa_ms, double alpha_ms) {
  if (p <= 1) return 0;
  const RingCoefficients c = ring_allreduce_coefficients(p);
  return c.bandwidth * kappa_ms + c.latency * alpha_ms;
}

double ring_allreduce_ms(int p, double bytes, double alpha_ms, double beta_bytes_per_ms) {
  return ring_allreduce_kappa_ms(p, beta_bytes_per_ms > 0 ? bytes / beta_bytes_per_ms : 0, alpha_ms);
}

AllreduceBenchmark load_allreduce_benchmark(const std::string& path) {
  nlohmann::json j = read_json_file(path, "cannot read --allreduce file '" + path + "': no such file or not readable",
                                    "; expected the output of `cnnscale allreduce --json FILE`");
  AllreduceBenchmark b;
  b.file = path;
  if (!j.is_object() || !j.contains("world_size") || !j["world_size"].is_number_integer())
    fail(path, ": required field 'world_size' is missing; expected the output of `cnnscale allreduce --json FILE`");
  b.world_size = j["world_size"].get<int>();
  if (j.contains("backend") && j["backend"].is_string()) b.backend = j["backend"].get<std::string>();
  if (j.contains("level") && j["level"].is_string()) b.level = j["level"].get<std::string>();
  if (b.level != "world" && b.level != "node" && b.level != "cross")
    fail(path, ": field 'level' is '", b.level, "'; expected world, node or cross");
  b.nodes = j.contains("nodes") && j["nodes"].is_number_integer() ? j["nodes"].get<int>() : 1;
  b.ranks_per_node = j.contains("ranks_per_node") && j["ranks_per_node"].is_number_integer()
                         ? j["ranks_per_node"].get<int>()
                         : (b.level == "world" ? std::max(1, b.world_size / std::max(1, b.nodes)) : 1);
  if (!j.contains("results") || !j["results"].is_array())
    fail(path, ": required field 'results' (a list of rows) is missing");
  for (const auto& r : j["results"]) {
    if (!r.is_object() || !r.contains("size") || !r["size"].is_number())
      fail(path, ": a row of 'results' lacks the number 'size'");
    if (!r.contains("time_us") || !r["time_us"].is_number())
      fail(path, ": a row of 'results' lacks the number 'time_us'");
    if (r.contains("wrong") && r["wrong"].is_number() && r["wrong"].get<double>() > 0)
      fail(path, ": the benchmark row of size ", r["size"].dump(), " has wrong results; its timings are not usable");
    check_measured(path, "results[].size", r["size"].get<double>(), kMaxBytes, "bytes");
    check_measured(path, "results[].time_us", r["time_us"].get<double>(), kMaxTimeUs, "µs");
    AllreduceRow row{r["size"].get<double>(), r["time_us"].get<double>() / 1000.0};
    if (row.bytes > 0 && row.time_ms > 0) b.rows.push_back(row);
  }
  if (b.world_size < 2)
    fail(path, ": the benchmark ran on ", b.world_size,
         " rank; α and β need an allreduce across at least 2 ranks (run it with mpirun/srun -n 2 or more)");
  std::set<double> sizes;
  for (const auto& r : b.rows) sizes.insert(r.bytes);
  if (sizes.size() < 2) fail(path, ": needs at least two message sizes with positive times to fit α and β");
  return b;
}

NetLevelKind AllreduceBenchmark::kind() const {
  if (level == "node") return NetLevelKind::intra;
  if (level == "cross") return NetLevelKind::cross;
  if (nodes <= 1) return NetLevelKind::intra;
  if (world_size == nodes) return NetLevelKind::cross;  // one rank per node: the flat sum is the cross-node one
  return NetLevelKind::unusable;
}

AlphaBeta fit_alpha_beta_benchmark(const AllreduceBenchmark& bench) { return fit_alpha_beta_pooled({&bench}); }

AlphaBeta fit_alpha_beta_pooled(const std::vector<const AllreduceBenchmark*>& benches,
                                const std::vector<std::pair<size_t, size_t>>* pick) {
  // t = a·α + b·(n/β) with a, b the ring's latency and bandwidth coefficients at each
  // benchmark's p; unknowns x0 = α, x1 = 1/β. Minimise Σ((t_i − model_i)/t_i)².
  std::vector<std::pair<size_t, size_t>> all;
  if (!pick) {
    for (size_t i = 0; i < benches.size(); ++i)
      for (size_t k = 0; k < benches[i]->rows.size(); ++k) all.push_back({i, k});
    pick = &all;
  }
  double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
  for (auto [i, k] : *pick) {
    const auto& row = benches[i]->rows[k];
    const RingCoefficients c = ring_allreduce_coefficients(benches[i]->world_size);
    const double a = c.latency, b = c.bandwidth * row.bytes, w = 1.0 / (row.time_ms * row.time_ms);
    s00 += w * a * a;
    s01 += w * a * b;
    s11 += w * b * b;
    r0 += w * a * row.time_ms;
    r1 += w * b * row.time_ms;
  }
  AlphaBeta out;
  double x0 = 0, x1 = 0;
  const double det = s00 * s11 - s01 * s01;
  if (det > 1e-12 * s00 * s11) {
    x0 = (r0 * s11 - r1 * s01) / det;
    x1 = (s00 * r1 - s01 * r0) / det;
  }
  if (!(det > 1e-12 * s00 * s11) || x0 < 0) {  // latency not resolvable: bandwidth-only fit
    x0 = 0;
    x1 = r1 / s11;
    out.note = "the benchmark's small sizes do not resolve a positive latency: alpha pinned to 0";
  }
  const std::string file = benches.empty() ? std::string("(no benchmark)") : benches.front()->file;
  if (!(x1 > 0)) fail(file, ": allreduce time does not grow with message size; cannot fit a bandwidth (beta)");
  out.alpha_ms = x0;
  out.beta_bytes_per_ms = 1.0 / x1;
  double sum = 0;
  for (auto [i, k] : *pick) {
    const auto& row = benches[i]->rows[k];
    const double e =
        std::fabs(ring_allreduce_ms(benches[i]->world_size, row.bytes, x0, out.beta_bytes_per_ms) - row.time_ms) /
        row.time_ms;
    sum += e;
    out.max_rel_error = std::max(out.max_rel_error, e);
  }
  out.mean_rel_error = pick->empty() ? 0 : sum / pick->size();
  return out;
}

AlphaKappa fit_alpha_kappa_runs(const std::vector<CommPoint>& points) {
  // y = a·α + b·κ with a, b the ring's latency and bandwidth coefficients.
  double saa = 0, sab = 0, sbb = 0, say = 0, sby = 0;
  std::set<int> counts;
  for (const auto& pt : points) {
    if (pt.ranks <= 1) continue;
    const RingCoefficients ring = ring_allreduce_coefficients(pt.ranks);
    const double a = ring.latency, b = ring.bandwidth;
    saa += a * a;
    sab += a * b;
    sbb += b * b;
    say += a * pt.exposed_ms;
    sby += b * pt.exposed_ms;
    counts.insert(pt.ranks);
  }
  AlphaKappa out;
  if (counts.empty()) {
    out.note = "no multi-rank run: communication cannot be fitted";
    return out;
  }
  auto kappa_only = [&] {
    out.alpha_ms = 0;
    out.kappa_ms = std::max(0.0, sby / sbb);
  };
  if (counts.size() < 2) {
    kappa_only();
    out.note = "only one multi-rank count: latency (alpha) is not identifiable and is pinned to 0";
    return out;
  }
  const double det = saa * sbb - sab * sab;
  out.alpha_ms = (say * sbb - sby * sab) / det;
  out.kappa_ms = (saa * sby - sab * say) / det;
  if (out.alpha_ms < 0) {
    kappa_only();
    out.note = "the fitted latency was negative: alpha pinned to 0";
  } else if (out.kappa_ms < 0) {
    out.kappa_ms = 0;
    out.alpha_ms = std::max(0.0, say / saa);
    out.note = "the fitted bandwidth term was negative: beta taken as infinite (latency only)";
  }
  return out;
}

}  // namespace cnnscale::report
