// timeline.cpp — see timeline.hpp.
#include "train/timeline.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "train/step_stats.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"

namespace cnnscale {

TimelineWindow parse_timeline_steps(const std::string& s) {
  long long a = 0, b = 0;
  char colon = 0, extra = 0;
  const int got = std::sscanf(s.c_str(), "%lld%c%lld%c", &a, &colon, &b, &extra);
  if (got != 3 || colon != ':' || a < 1 || b < a)
    fail("--timeline-steps ", s,
         " is not a step range; give A:B with 1 <= A <= B (steps counted from 1 as the "
         "progress lines count them, e.g. 21:70)");
  return {a, b};
}

TimelineWindow default_timeline_window(int64_t first_step, int64_t total_steps) {
  const int64_t run = std::max<int64_t>(0, total_steps - first_step);
  int64_t first = first_step + warmup_steps_to_skip(static_cast<long long>(run)) + 1;
  first = std::max<int64_t>(first_step + 1, std::min(first, total_steps));
  return {first, std::min(total_steps, first + kDefaultTimelineSteps - 1)};
}

double Timeline::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Timeline::Timeline(std::string path, TimelineWindow window, int rank, std::string host,
                   const std::vector<std::pair<size_t, std::string>>& layers, const std::vector<size_t>& bucket_bytes)
    : path_(std::move(path)), host_(std::move(host)), window_(window), rank_(rank), bucket_bytes_(bucket_bytes) {
  for (const auto& [end, name] : layers) {
    const auto dot = name.rfind('.');
    layers_.emplace_back(end, dot == std::string::npos ? name : name.substr(0, dot));
  }
  std::sort(layers_.begin(), layers_.end());
}

bool Timeline::begin_step(int64_t step) {
  step_ = step;
  recording_ = !written_ && step >= window_.first && step <= window_.last;
  return recording_;
}

void Timeline::span(Track track, const std::string& name, double start, double end) {
  if (!recording_) return;
  events_.push_back({track, name, start, std::max(start, end), step_});
}

const std::string& Timeline::layer_names(size_t prev_ready, size_t ready_end) {
  auto [it, fresh] = layer_cache_.try_emplace({prev_ready, ready_end});
  if (!fresh) return it->second;
  std::vector<std::string> names;  // front of the flat layout first: the last layers
  for (const auto& [end, name] : layers_)
    if (end > prev_ready && end <= ready_end && std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : " + ") + n;
  it->second = s.empty() ? std::string("backward") : s;
  return it->second;
}

void Timeline::backward(size_t prev_ready, size_t ready_end, double start, double end) {
  if (!recording_) return;
  span(kBackward, layer_names(prev_ready, ready_end), start, end);
}

void Timeline::buckets(const std::vector<BucketSpan>& spans) {
  if (!recording_) return;
  for (size_t i = 0; i < spans.size(); ++i)
    if (spans[i].started > 0 && spans[i].summed > 0)
      span(static_cast<Track>(kBucket0 + static_cast<int>(i)), "allreduce bucket " + std::to_string(i),
           spans[i].started, spans[i].summed);
}

std::string Timeline::track_name(int tid) const {
  switch (tid) {
    case kStep: return "step";
    case kData: return "data wait";
    case kForward: return "forward";
    case kBackward: return "backward";
    case kGradWait: return "gradient wait (exposed)";
    case kOptimizer: return "optimizer";
    case kEvaluation: return "evaluation";
    case kCheckpoint: return "checkpoint";
    default: break;
  }
  const size_t i = static_cast<size_t>(tid - kBucket0);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "allreduce bucket %zu (%.2f MB)", i,
                i < bucket_bytes_.size() ? static_cast<double>(bucket_bytes_[i]) / 1e6 : 0.0);
  return buf;
}

size_t Timeline::write(ControlComm& control) {
  using json = nlohmann::json;
  written_ = true;
  recording_ = false;
  const int size = control.size();
  // Clock offsets to rank 0: after a barrier every rank reads its clock at nearly the
  // same moment; the median of a few rounds drops a round where a rank was descheduled.
  constexpr int kRounds = 5;
  std::vector<std::vector<double>> rounds(static_cast<size_t>(size));
  for (int k = 0; k < kRounds; ++k) {
    control.allreduce(0, ReduceOp::max, "the timeline clock exchange");
    const std::vector<double> t = control.gather(now(), 0, "the timeline clock exchange");
    for (size_t r = 0; r < t.size(); ++r) rounds[r].push_back(t[0] - t[r]);
  }
  std::vector<double> offsets(static_cast<size_t>(size), 0.0);
  if (control.rank() == 0)
    for (size_t r = 0; r < rounds.size(); ++r) {
      std::sort(rounds[r].begin(), rounds[r].end());
      offsets[r] = rounds[r][rounds[r].size() / 2];
    }
  control.broadcast(offsets.data(), offsets.size() * sizeof(double), 0, "the timeline clock exchange");
  const double offset = offsets[static_cast<size_t>(rank_)];
  double first = std::numeric_limits<double>::infinity();
  for (const auto& e : events_) first = std::min(first, e.start + offset);
  double origin = control.allreduce(first, ReduceOp::min, "the timeline clock exchange");
  if (!std::isfinite(origin)) origin = 0;  // no rank recorded anything

  // This rank's part: its metadata, then its events, comma-separated.
  std::string part;
  auto add = [&](const json& j) {
    if (!part.empty()) part += ",\n";
    part += j.dump();
  };
  add({{"name", "process_name"},
       {"ph", "M"},
       {"pid", rank_},
       {"tid", 0},
       {"args", {{"name", "rank " + std::to_string(rank_) + " (" + host_ + ")"}}}});
  add({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank_}, {"tid", 0}, {"args", {{"sort_index", rank_}}}});
  std::set<int> tids;
  for (int t = kStep; t <= kCheckpoint; ++t) tids.insert(t);
  for (size_t i = 0; i < bucket_bytes_.size(); ++i) tids.insert(kBucket0 + static_cast<int>(i));
  for (int t : tids) {
    add({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", t}, {"args", {{"name", track_name(t)}}}});
    add({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", rank_}, {"tid", t}, {"args", {{"sort_index", t}}}});
  }
  for (const auto& e : events_) {
    const double ts = std::max(0.0, (e.start + offset - origin) * 1e6);
    const double dur = std::max(0.0, (e.end - e.start) * 1e6);
    add({{"name", e.name},
         {"cat", track_name(e.tid)},
         {"ph", "X"},
         {"pid", rank_},
         {"tid", e.tid},
         {"ts", std::round(ts * 1000) / 1000},
         {"dur", std::round(dur * 1000) / 1000},
         {"args", {{"step", e.step}}}});
  }
  const size_t mine = events_.size();
  events_.clear();
  events_.shrink_to_fit();
  const std::vector<std::string> parts = control.gather_strings(part, 0, "the timeline gather");
  const size_t total = control.allreduce(static_cast<uint64_t>(mine), ReduceOp::sum, "the timeline gather");
  if (control.rank() != 0) return mine;

  json other = {{"tool", "cnnscale train --timeline"},
                {"steps", std::to_string(window_.first) + ":" + std::to_string(window_.last)},
                {"ranks", size},
                {"clock", "steady_clock, aligned to rank 0 by barrier + timestamp exchange"},
                {"clock_offsets_us", json::array()}};
  for (double o : offsets) other["clock_offsets_us"].push_back(std::round(o * 1e9) / 1e3);
  std::string out = "{\"displayTimeUnit\": \"ms\",\n\"otherData\": " + other.dump() + ",\n\"traceEvents\": [\n";
  bool any = false;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (any) out += ",\n";
    out += p;
    any = true;
  }
  out += "\n]}\n";
  write_file_atomic(path_, out);  // rank 0 only; the caller turns a failure into a warning
  return total;
}

}  // namespace cnnscale
