// run_record.cpp — reading and validating run.json (see run_record.hpp).
#include "report/run_record.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "report/json_file.hpp"
#include "report/plausible.hpp"
#include "report/watch.hpp"
#include "util/error.hpp"

namespace cnnscale::report {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Field access with errors that name the file and the (dotted) field.
class Fields {
 public:
  explicit Fields(const std::string& file) : file_(file) {}

  const json& at(const json& obj, const std::string& path, const std::string& key) const {
    if (!obj.is_object()) fail(file_, ": '", path, "' is not a JSON object");
    auto it = obj.find(key);
    if (it == obj.end())
      fail(file_, ": required field '", join(path, key),
           "' is missing (is this a run.json written by `cnnscale train`?)");
    return *it;
  }
  double number(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = at(obj, path, key);
    if (!v.is_number()) fail(file_, ": field '", join(path, key), "' must be a number, got ", v.dump());
    return v.get<double>();
  }
  double positive(const json& obj, const std::string& path, const std::string& key) const {
    double v = number(obj, path, key);
    if (!(v > 0)) fail(file_, ": field '", join(path, key), "' must be positive, got ", v);
    return v;
  }
  double nonnegative(const json& obj, const std::string& path, const std::string& key) const {
    double v = number(obj, path, key);
    if (!(v >= 0)) fail(file_, ": field '", join(path, key), "' must not be negative, got ", v);
    return v;
  }
  // An integer in [min, max] (a larger one is no run of this world: report/plausible.hpp).
  long count(const json& obj, const std::string& path, const std::string& key, long min,
             long max = 1'000'000'000'000) const {
    const json& v = at(obj, path, key);
    if (!v.is_number_integer()) fail(file_, ": field '", join(path, key), "' must be an integer, got ", v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max))
      fail(file_, ": field '", join(path, key), "' must be at most ", max, ", got ", v.dump());
    long n = v.get<long>();
    if (n < min) fail(file_, ": field '", join(path, key), "' must be at least ", min, ", got ", n);
    if (n > max) fail(file_, ": field '", join(path, key), "' must be at most ", max, ", got ", n);
    return n;
  }
  std::string text(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = at(obj, path, key);
    if (!v.is_string()) fail(file_, ": field '", join(path, key), "' must be a string, got ", v.dump());
    return v.get<std::string>();
  }
  // Present-but-null allowed (e.g. test_accuracy when not evaluated).
  std::optional<double> nullable(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = at(obj, path, key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_number()) fail(file_, ": field '", join(path, key), "' must be a number or null, got ", v.dump());
    return v.get<double>();
  }
  // Optional field: absent or null → nullopt.
  std::optional<double> optional(const json& obj, const std::string& key) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return std::nullopt;
    if (!it->is_number()) fail(file_, ": field '", key, "' must be a number, got ", it->dump());
    return it->get<double>();
  }
  const std::string& file() const { return file_; }

 private:
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  const std::string& file_;
};

}  // namespace

std::string RunRecord::device_kind() const {
  const std::string d = lower(device), b = lower(backend);
  for (const char* g : {"cuda", "gpu", "nvidia", "rocm", "hip", "tesla", "h100", "a100", "v100"})
    if (d.find(g) != std::string::npos) return "gpu";
  if (b == "nccl" || b == "rccl") return "gpu";
  return "cpu";
}

RunRecord parse_run(const json& doc, const std::string& file) {
  if (!doc.is_object()) fail(file, ": expected a JSON object at the top level");
  Fields f(file);
  RunRecord r;
  r.file = file;
  constexpr long kMaxRanks = 10'000'000;  // ranks, nodes: more than any machine has
  r.world_size = static_cast<int>(f.count(doc, "", "world_size", 1, kMaxRanks));
  r.nodes = static_cast<int>(f.count(doc, "", "nodes", 1, kMaxRanks));
  r.ranks_per_node = static_cast<int>(f.count(doc, "", "ranks_per_node", 1, kMaxRanks));
  r.backend = f.text(doc, "", "backend");
  r.device = f.text(doc, "", "device");
  if (auto g = doc.find("gpu"); g != doc.end() && g->is_object())  // read past whatever else it holds
    if (auto k = g->find("ranks_per_gpu"); k != g->end() && k->is_number_integer() && k->get<long>() >= 1 &&
                                           k->get<long>() <= kMaxRanks)
      r.ranks_per_gpu = static_cast<int>(k->get<long>());
  r.model = f.text(doc, "", "model");
  r.precision = f.text(doc, "", "precision");
  // A GPU run with TF32 convolutions and matmuls (run.json "tf32", train --tf32) computes
  // at another precision and speed than full fp32: its own group ("fp32+tf32"). Older
  // run.json files have no "tf32" and ran without it.
  if (auto it = doc.find("tf32"); it != doc.end() && it->is_boolean() && it->get<bool>()) r.precision += "+tf32";
  r.batch_per_rank = f.count(doc, "", "batch_per_rank", 1);
  r.global_batch = f.count(doc, "", "global_batch", 1);
  r.steps = f.count(doc, "", "steps", 0);
  r.images_per_s = f.positive(doc, "", "images_per_s");
  const json& step = f.at(doc, "", "step_ms");
  r.step_ms_median = f.positive(step, "step_ms", "median");
  r.step_ms_p10 = f.positive(step, "step_ms", "p10");
  r.step_ms_p90 = f.positive(step, "step_ms", "p90");
  r.step_ms_mean = f.optional(step, "mean");
  const json& bd = f.at(doc, "", "breakdown_ms");
  r.breakdown.data = f.nonnegative(bd, "breakdown_ms", "data");
  r.breakdown.compute = f.nonnegative(bd, "breakdown_ms", "compute");
  r.breakdown.comm_exposed = f.nonnegative(bd, "breakdown_ms", "comm_exposed");
  r.breakdown.optimizer = f.nonnegative(bd, "breakdown_ms", "optimizer");
  if (auto it = doc.find("breakdown_median_ms"); it != doc.end() && it->is_object()) {
    StepBreakdown m;
    m.data = f.nonnegative(*it, "breakdown_median_ms", "data");
    m.compute = f.nonnegative(*it, "breakdown_median_ms", "compute");
    m.comm_exposed = f.nonnegative(*it, "breakdown_median_ms", "comm_exposed");
    m.optimizer = f.nonnegative(*it, "breakdown_median_ms", "optimizer");
    r.breakdown_median = m;
  }
  if (auto ts = f.optional(doc, "timed_steps"); ts && *ts >= 1) {
    check_measured(file, "timed_steps", *ts, kMaxTrainSamples, "steps");
    r.timed_steps = static_cast<long>(*ts);
  }
  if (auto it = doc.find("grad_sum"); it != doc.end() && it->is_string()) r.grad_sum = it->get<std::string>();
  r.train_loss = f.nullable(doc, "", "train_loss");
  r.test_accuracy = f.nullable(doc, "", "test_accuracy");
  if (r.test_accuracy) {
    r.test_metric_name = "accuracy";
    r.test_metric = r.test_accuracy;
  } else if (auto it = doc.find("test_metrics"); it != doc.end() && it->is_object()) {
    for (const char* name : {"rmse", "miou"})  // regression; segmentation (mean IoU)
      if (it->contains(name) && (*it)[name].is_number()) {
        r.test_metric_name = name;
        r.test_metric = (*it)[name].get<double>();
        break;
      }
  }
  if (auto it = doc.find("task"); it != doc.end() && it->is_object() && it->contains("kind") &&
                                  (*it)["kind"].is_string())
    r.samples_not_images = (*it)["kind"] != "classification";

  r.images_per_s_p10 = f.optional(doc, "images_per_s_p10");
  r.images_per_s_p90 = f.optional(doc, "images_per_s_p90");
  r.grad_bytes = f.optional(doc, "grad_bytes");
  r.epochs = f.optional(doc, "epochs");
  if (auto it = doc.find("compute_median_ms_per_rank"); it != doc.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != static_cast<size_t>(r.world_size))
      fail(file, ": field 'compute_median_ms_per_rank' must be a list of world_size (", r.world_size, ") numbers");
    for (const auto& e : *it) {
      if (!e.is_number() || !(e.get<double>() >= 0))
        fail(file, ": field 'compute_median_ms_per_rank' must hold non-negative numbers");
      r.compute_ms_per_rank.push_back(e.get<double>());
    }
  }
  if (auto it = doc.find("time_to_accuracy"); it != doc.end() && !it->is_null()) {
    if (!it->is_array()) fail(file, ": field 'time_to_accuracy' must be a list of {accuracy, seconds}");
    for (const auto& e : *it) {
      AccuracyTime at;
      at.accuracy = f.number(e, "time_to_accuracy[]", "accuracy");
      at.seconds = f.nonnegative(e, "time_to_accuracy[]", "seconds");
      r.time_to_accuracy.push_back(at);
    }
  }
  if (auto it = doc.find("slurm"); it != doc.end() && it->is_object()) {
    if (auto j = it->find("job_id"); j != it->end())
      r.slurm_job_id = j->is_string() ? j->get<std::string>() : j->dump();
    if (auto n = it->find("nodelist"); n != it->end() && n->is_string()) r.slurm_nodelist = n->get<std::string>();
  }

  if (auto it = doc.find("timeline"); it != doc.end() && it->is_string()) r.timeline = it->get<std::string>();
  if (auto n = f.optional(doc, "train_samples"); n && *n >= 1) {
    check_measured(file, "train_samples", *n, kMaxTrainSamples, "images");
    r.train_samples = static_cast<long>(*n);
  }
  if (auto it = doc.find("data"); it != doc.end() && it->is_string()) {
    r.synthetic = *it == "synthetic";
    r.data = it->get<std::string>();
  }
  if (auto c = doc.find("config"); c != doc.end() && c->is_object())
    if (auto a = c->find("augment"); a != c->end() && a->is_string()) r.augment = a->get<std::string>();
  for (auto [name, dst] : {std::pair{"data_threads", &r.data_threads}, {"threads_per_rank", &r.threads_per_rank}})
    if (auto t = f.optional(doc, name); t && *t >= 1) {
      check_measured(file, name, *t, 1e6, "threads");
      *dst = static_cast<int>(*t);
    }
  if (auto it = doc.find("accuracy_per_epoch"); it != doc.end() && it->is_array())
    for (const auto& e : *it)
      if (e.is_object() && e.contains("epoch") && e["epoch"].is_number() && e.contains("accuracy") &&
          e["accuracy"].is_number())
        r.accuracy_per_epoch.push_back({e["epoch"].get<double>(), e["accuracy"].get<double>()});

  // Consistency: a report built on contradictory numbers would be silently wrong.
  if (r.nodes > r.world_size) fail(file, ": 'nodes' (", r.nodes, ") is larger than 'world_size' (", r.world_size, ")");
  if (r.global_batch != r.batch_per_rank * r.world_size)
    fail(file, ": 'global_batch' (", r.global_batch, ") is not 'batch_per_rank' x 'world_size' (", r.batch_per_rank,
         " x ", r.world_size, ")");
  if (r.step_ms_p10 > r.step_ms_median || r.step_ms_median > r.step_ms_p90)
    fail(file, ": 'step_ms' must satisfy p10 <= median <= p90, got ", r.step_ms_p10, ", ", r.step_ms_median, ", ",
         r.step_ms_p90);
  if (r.grad_bytes && !(*r.grad_bytes > 0)) fail(file, ": field 'grad_bytes' must be positive, got ", *r.grad_bytes);
  // Plausible ranges (report/plausible.hpp): a damaged or hand-edited file, not a measurement.
  check_measured(file, "images_per_s", r.images_per_s, kMaxImagesPerS, "images/s");
  if (r.images_per_s_p10) check_measured(file, "images_per_s_p10", *r.images_per_s_p10, kMaxImagesPerS, "images/s");
  if (r.images_per_s_p90) check_measured(file, "images_per_s_p90", *r.images_per_s_p90, kMaxImagesPerS, "images/s");
  check_measured(file, "step_ms.p90", r.step_ms_p90, kMaxStepMs, "ms");  // p10 <= median <= p90
  if (r.step_ms_mean) check_measured(file, "step_ms.mean", *r.step_ms_mean, kMaxStepMs, "ms");
  for (const auto& [name, b] :
       {std::pair{"breakdown_ms", r.breakdown}, {"breakdown_median_ms", r.breakdown_median.value_or(StepBreakdown{})}})
    for (const auto& [part, v] : {std::pair{"data", b.data},
                                  {"compute", b.compute},
                                  {"comm_exposed", b.comm_exposed},
                                  {"optimizer", b.optimizer}})
      check_measured(file, std::string(name) + "." + part, v, kMaxStepMs, "ms");
  for (double v : r.compute_ms_per_rank) check_measured(file, "compute_median_ms_per_rank", v, kMaxStepMs, "ms");
  if (r.grad_bytes) check_measured(file, "grad_bytes", *r.grad_bytes, kMaxBytes, "bytes");
  if (r.epochs) check_measured(file, "epochs", *r.epochs, kMaxEpochs, "epochs");
  return r;
}

RunRecord load_run(const std::string& dir) {
  fs::path p(dir);
  std::error_code ec;
  if (!fs::exists(p, ec)) fail("run directory '", dir, "' does not exist");
  fs::path file = fs::is_directory(p, ec) ? p / "run.json" : p;
  if (!fs::exists(file, ec)) fail("'", dir, "' has no run.json: ", describe_unfinished(dir));
  json doc = read_json_file(file.string(), "cannot read '" + file.string() + "'");
  // A run that stopped or was killed recorded how (train/run_end.hpp): it measured no
  // whole run, so it is no point of a scaling report.
  if (doc.is_object() && doc.contains("ended") && doc["ended"].is_string() && doc["ended"] != "finished") {
    const long steps = doc.value("steps", 0L), planned = doc.value("planned_steps", 0L);
    fail("'", dir, "' did not finish: stopped after step ", steps, planned > 0 ? " of " + std::to_string(planned) : "",
         ": ", doc["ended"].get<std::string>(),
         " (run.json). `cnnscale train ... --resume auto` continues it; "
         "--allow-missing leaves it out of the report");
  }
  RunRecord r = parse_run(doc, file.string());
  r.dir = dir;
  return r;
}

}  // namespace cnnscale::report
