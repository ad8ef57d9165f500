// tensorboard.hpp — TensorBoard event files (`cnnscale train --tensorboard DIR`): rank 0
// writes events.out.tfevents.<unix time>.<host> in DIR, which `tensorboard --logdir`
// shows while the job runs. Tags and how to open them: docs/watching.md.
//
// Format: TFRecord framing (train/tfrecord.hpp) around Event messages encoded by
// protobuf from train/tensorboard.proto (TensorBoard's field numbers). The first
// record is file_version "brain.Event:2"; then a SessionLog START at the first step
// this process can write (TensorBoard drops what earlier files recorded at or after
// it, so a resumed run replaces the steps its checkpoint lost instead of showing them
// twice); then scalars (Summary.Value simple_value) and the run's options as a text
// summary (a string tensor with plugin_name "text").
//
// Files: one per process run, created with O_EXCL, never reopened. TensorBoard reads a
// directory's files in name order, so <time> is now or, when DIR already holds an event
// file with a later (or the same) time, that time + 1: a resumed run's file always
// sorts after the files it supersedes, whatever the clocks of the nodes say.
// Records are written whole or not at all: each goes out in one write(2) loop and a
// short or failed write is cut back off the file, so a reader never meets a torn
// record followed by good ones (TensorBoard stops reading a file at the first bad
// CRC). A failed record is not lost silently: the first failure is a warning with the
// OS's reason, each is counted (records_lost; run.json tensorboard_records_lost).
//
// Flushing: no user-space buffer, so each record is in the kernel once the call
// returns (a reader on the same node sees it at once). For shared file systems, whose
// clients may hold written pages for 30 s, a background thread fdatasync()s the file
// when something was written since its last sync, every sync_every_s (5 s): on the
// file server within 10 s, and the training thread never waits for the sync.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cnnscale {

namespace tb {

struct Scalar {
  std::string tag;
  double value = 0;  // stored as float (Summary.Value.simple_value)
};

// The encoded Event messages (before framing).
std::string file_version_event(double wall_time);                 // "brain.Event:2"
std::string session_start_event(double wall_time, int64_t step);  // SessionLog START
std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& values);
// The text plugin's summary: a scalar DT_STRING tensor holding `markdown`.
std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& markdown);

// An Event decoded (for tests and tools). Throws UserError when `bytes` is no Event.
struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  int session_status = 0;  // SessionLog.status: 1 = START
  std::vector<Scalar> scalars;
  std::vector<std::pair<std::string, std::string>> texts;  // tag, string of a "text" plugin tensor
};
DecodedEvent decode_event(const std::string& bytes);

double wall_time_now();  // seconds since the Unix epoch

// The <time> of an "events.out.tfevents.<time>.<host>" name, -1 for other names.
int64_t event_file_time(const std::string& name);

}  // namespace tb

class TensorBoardWriter {
 public:
  // Creates `dir` (and parents) and the new event file in it, and writes the
  // file_version record. Throws UserError naming the directory when it cannot.
  TensorBoardWriter(const std::string& dir, const std::string& host, double sync_every_s = 5);
  ~TensorBoardWriter();  // a last fdatasync, then close
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void session_start(int64_t step);
  void scalars(int64_t step, const std::vector<tb::Scalar>& values);
  void text(int64_t step, const std::string& tag, const std::string& markdown);

  const std::string& path() const { return path_; }
  int64_t records_written() const { return written_; }
  int64_t records_lost() const { return lost_; }
  int64_t syncs() const { return syncs_.load(); }  // fdatasync calls made by the background thread

 private:
  void append(const std::string& event);  // frames and writes one record, whole or not at all
  void sync_loop(double every_s);

  int fd_ = -1;
  std::string path_, error_;
  int64_t written_ = 0, lost_ = 0;
  std::atomic<bool> dirty_{false};
  std::atomic<int64_t> syncs_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // under mu_
  std::thread syncer_;
};

}  // namespace cnnscale
