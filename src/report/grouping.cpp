// grouping.cpp — configuration groups and strong/weak detection (see grouping.hpp).
#include "report/grouping.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "util/error.hpp"

namespace cnnscale::report {

const char* mode_name(ScalingMode m) { return m == ScalingMode::strong ? "strong" : "weak"; }

ScalingMode parse_mode(const std::string& s) {
  if (s == "strong") return ScalingMode::strong;
  if (s == "weak") return ScalingMode::weak;
  fail("--mode ", s, " is not known; use strong (global batch constant) or weak (per-rank batch constant)");
}

namespace {

std::string describe(const RunRecord& r) { return r.dir.empty() ? r.file : r.dir; }

template <typename F>
bool all_equal(const std::vector<RunRecord>& runs, F field) {
  for (const auto& r : runs)
    if (field(r) != field(runs.front())) return false;
  return true;
}

}  // namespace

std::vector<RunGroup> group_runs(const std::vector<RunRecord>& runs, std::optional<ScalingMode> forced) {
  if (runs.empty()) fail("no runs to report on");
  std::map<std::string, std::vector<RunRecord>> by_key;
  std::vector<std::string> order;
  for (const auto& r : runs) {
    const std::string key = r.precision + " " + r.backend + " " + r.device_kind();
    if (!by_key.count(key)) order.push_back(key);
    by_key[key].push_back(r);
  }
  std::vector<RunGroup> groups;
  for (const auto& key : order) {
    auto& members = by_key[key];
    for (const auto& r : members)
      if (r.model != members.front().model)
        fail("runs of different models in one group (", key, "): '", describe(members.front()), "' trained '",
             members.front().model, "' but '", describe(r), "' trained '", r.model,
             "'; report each model separately (cnnscale report RUN... of one model)");
    RunGroup g;
    g.model = members.front().model;
    g.precision = members.front().precision;
    g.backend = members.front().backend;
    g.device_kind = members.front().device_kind();
    g.label = g.model + " " + key;

    const bool same_global = all_equal(members, [](const RunRecord& r) { return r.global_batch; });
    const bool same_local = all_equal(members, [](const RunRecord& r) { return r.batch_per_rank; });
    if (forced) {
      g.mode = *forced;
      g.mode_forced = true;
      if (g.mode == ScalingMode::strong && !same_global)
        g.notes.push_back("--mode strong was given but the global batch differs between runs; "
                          "speedup is still the ratio of images/s");
      if (g.mode == ScalingMode::weak && !same_local)
        g.notes.push_back("--mode weak was given but the per-rank batch differs between runs");
    } else if (same_global) {
      g.mode = ScalingMode::strong;
    } else if (same_local) {
      g.mode = ScalingMode::weak;
    } else {
      std::ostringstream os;
      for (const auto& r : members)
        os << " " << describe(r) << " (" << r.world_size << " ranks x " << r.batch_per_rank << ")";
      fail("runs of ", g.label, " keep neither the global batch (strong scaling) nor the per-rank batch (weak "
           "scaling) constant:", os.str(), "; pass --mode strong|weak, or report the series separately");
    }

    std::stable_sort(members.begin(), members.end(),
                     [](const RunRecord& a, const RunRecord& b) { return a.world_size < b.world_size; });
    for (size_t i = 0; i < members.size();) {
      size_t j = i;
      while (j < members.size() && members[j].world_size == members[i].world_size) ++j;
      std::vector<RunRecord> same(members.begin() + i, members.begin() + j);
      std::sort(same.begin(), same.end(),
                [](const RunRecord& a, const RunRecord& b) { return a.images_per_s < b.images_per_s; });
      g.runs.push_back(same[(same.size() - 1) / 2]);  // median (lower middle for an even count)
      g.repeats.push_back(static_cast<int>(same.size()));
      if (same.size() > 1)
        g.notes.push_back(std::to_string(same.size()) + " runs at " + std::to_string(same[0].world_size) +
                          " ranks: the one with the median images/s (" + describe(g.runs.back()) +
                          ") represents that count");
      i = j;
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace cnnscale::report
