// timeline.hpp — --timeline FILE.json: where each step's time goes, on every rank, as a
// Chrome trace-event file (the JSON object format {"traceEvents": [...],
// "displayTimeUnit": "ms"}) that Perfetto (ui.perfetto.dev) and chrome://tracing open.
//
// One process per rank (pid = rank, named "rank N (host)") and one track (tid, named)
// per kind of work: step, data wait, forward, backward (one span per layer with
// parameters, named after it: the grad-ready calls of Model::forward_backward), gradient
// wait (the exposed part of the sums), optimizer, evaluation, checkpoint, and one track
// per gradient bucket whose span runs from the bucket's ready() to its sum being seen
// complete (BucketSpan, comm/bucket_reducer.hpp), so that bucket spans overlapping the
// backward spans show the overlap. Complete events ("ph": "X"), ts and dur in
// microseconds, ts >= 0 from the earliest recorded event.
//
// Bounded: only the steps of the window [first, last] (1-based, inclusive, counted as
// the progress lines count) are recorded, in memory: about 10 + layers + buckets events
// per step and rank (~150 bytes each in the file). At the end of step `last` (or of
// the run or at a stop signal, when earlier) write() — collective over the control
// plane — aligns the clocks (five rounds of barrier + timestamp gather at rank 0; each
// rank's offset to rank 0 is the median round's), gathers every rank's part at rank 0,
// and rank 0 writes the file atomically (temporary file + rename). A failed write is a
// warning: training goes on.
//
// Clocks: std::chrono::steady_clock seconds since its epoch (now()), the clock the MPI
// communicator stamps its sums with. A device (GPU) model's forward and backward return
// before the device has run them: their spans are host enqueue times there, and its
// gradient sums' bucket spans are not recorded (checked a step later; docs/gpu.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/bucket_reducer.hpp"
#include "comm/control_comm.hpp"

namespace cnnscale {

// --timeline-steps A:B (1-based, inclusive). {0, 0}: not given (the default window).
struct TimelineWindow {
  int64_t first = 0, last = 0;
  bool given() const { return first > 0; }
};
// "A:B" with 1 <= A <= B; throws UserError naming --timeline-steps otherwise.
TimelineWindow parse_timeline_steps(const std::string& s);
// The default: the first kDefaultTimelineSteps steps after the warm-up steps the
// summary leaves out (warmup_steps_to_skip), within [first_step + 1, total_steps].
constexpr int64_t kDefaultTimelineSteps = 50;
TimelineWindow default_timeline_window(int64_t first_step, int64_t total_steps);

class Timeline {
 public:
  enum Track : int {
    kStep = 1,
    kData,
    kForward,
    kBackward,
    kGradWait,
    kOptimizer,
    kEvaluation,
    kCheckpoint,
    kBucket0 = 100,  // bucket i: kBucket0 + i
  };

  // layers: each trainable parameter's flat end and name ("conv1.weight"), for the
  // backward spans' names; bucket_bytes: each gradient bucket's size, for its track name.
  Timeline(std::string path, TimelineWindow window, int rank, std::string host,
           const std::vector<std::pair<size_t, std::string>>& layers, const std::vector<size_t>& bucket_bytes);

  static double now();  // steady_clock seconds

  const std::string& path() const { return path_; }
  const TimelineWindow& window() const { return window_; }
  // The step about to run (1-based); returns recording(): whether it is in the window.
  bool begin_step(int64_t step);
  bool recording() const { return recording_; }
  bool written() const { return written_; }

  void span(Track track, const std::string& name, double start, double end);
  // The backward span of the layers whose gradients became final, flat offsets
  // (prev_ready, ready_end].
  void backward(size_t prev_ready, size_t ready_end, double start, double end);
  void buckets(const std::vector<BucketSpan>& spans);

  // Collective (every rank, same step): see above. Returns the events written (rank 0)
  // or contributed (other ranks).
  size_t write(ControlComm& control);

  // This rank's events (for tests): {track, name, start, end, step}.
  struct Event {
    int tid = 0;
    std::string name;
    double start = 0, end = 0;
    int64_t step = 0;
  };
  const std::vector<Event>& events() const { return events_; }

 private:
  std::string track_name(int tid) const;
  const std::string& layer_names(size_t prev_ready, size_t ready_end);

  std::string path_, host_;
  TimelineWindow window_;
  int rank_ = 0;
  std::vector<std::pair<size_t, std::string>> layers_;  // (flat end, layer name), by end
  std::vector<size_t> bucket_bytes_;
  std::map<std::pair<size_t, size_t>, std::string> layer_cache_;
  std::vector<Event> events_;
  int64_t step_ = 0;
  bool recording_ = false, written_ = false;
};

}  // namespace cnnscale
