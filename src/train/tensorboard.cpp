// tensorboard.cpp — see tensorboard.hpp.
#include "train/tensorboard.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "tensorboard.pb.h"  // generated from train/tensorboard.proto
#include "train/run_files.hpp"
#include "train/tfrecord.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace cnnscale {
namespace tb {
namespace {

std::string serialize(const tbproto::Event& e) {
  std::string out;
  if (!e.SerializeToString(&out)) internal_error("a TensorBoard event could not be encoded");
  return out;
}

tbproto::Event event_at(double wall_time, int64_t step) {
  tbproto::Event e;
  e.set_wall_time(wall_time);
  e.set_step(step);
  return e;
}

}  // namespace

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string file_version_event(double wall_time) {
  tbproto::Event e = event_at(wall_time, 0);
  e.set_file_version("brain.Event:2");
  return serialize(e);
}

std::string session_start_event(double wall_time, int64_t step) {
  tbproto::Event e = event_at(wall_time, step);
  e.mutable_session_log()->set_status(tbproto::SessionLog::START);
  return serialize(e);
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& values) {
  tbproto::Event e = event_at(wall_time, step);
  auto* summary = e.mutable_summary();
  for (const Scalar& s : values) {
    auto* v = summary->add_value();
    v->set_tag(s.tag);
    v->set_simple_value(static_cast<float>(s.value));
  }
  return serialize(e);
}

std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& markdown) {
  tbproto::Event e = event_at(wall_time, step);
  auto* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  auto* t = v->mutable_tensor();
  t->set_dtype(tbproto::DT_STRING);
  t->mutable_tensor_shape();  // present and empty: a scalar
  t->add_string_val(markdown);
  return serialize(e);
}

DecodedEvent decode_event(const std::string& bytes) {
  tbproto::Event e;
  if (!e.ParseFromString(bytes)) fail("not a TensorBoard Event message (", bytes.size(), " bytes)");
  DecodedEvent d;
  d.wall_time = e.wall_time();
  d.step = e.step();
  d.file_version = e.file_version();
  if (e.has_session_log()) d.session_status = static_cast<int>(e.session_log().status());
  for (const auto& v : e.summary().value()) {
    if (v.has_simple_value()) d.scalars.push_back({v.tag(), v.simple_value()});
    if (v.has_tensor() && v.metadata().plugin_data().plugin_name() == "text" && v.tensor().string_val_size() > 0)
      d.texts.emplace_back(v.tag(), v.tensor().string_val(0));
  }
  return d;
}

int64_t event_file_time(const std::string& name) {
  static const std::string prefix = "events.out.tfevents.";
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  int64_t t = 0;
  size_t i = prefix.size();
  for (; i < name.size() && i < prefix.size() + 12 && name[i] >= '0' && name[i] <= '9'; ++i)
    t = t * 10 + (name[i] - '0');
  return i > prefix.size() && i < name.size() && name[i] == '.' ? t : -1;
}

}  // namespace tb

TensorBoardWriter::TensorBoardWriter(const std::string& dir, const std::string& host, double sync_every_s) {
  ensure_directory(dir, "TensorBoard directory (--tensorboard)");
  // TensorBoard reads a directory's files in name order, and a resumed run's SessionLog
  // START only hides what was read before it: the name's time is therefore past every
  // event file already there (a node whose clock is behind, two runs in one second).
  int64_t t = static_cast<int64_t>(tb::wall_time_now());
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    t = std::max(t, tb::event_file_time(e.path().filename().string()) + 1);
  // One file per process run: never append to a file another run wrote.
  for (int tries = 0; tries < 1000 && fd_ < 0; ++tries, ++t) {
    path_ = dir + "/events.out.tfevents." + std::to_string(t) + "." + (host.empty() ? "host" : host);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0)
    fail("cannot create a TensorBoard event file in '", dir, "': ", std::strerror(errno),
         "; choose a writable --tensorboard directory, or pass --no-tensorboard");
  append(tb::file_version_event(tb::wall_time_now()));
  if (lost_ > 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
    fd_ = -1;
    fail("cannot write the TensorBoard event file '", path_, "': ", error_,
         "; free space there, choose another --tensorboard directory, or pass --no-tensorboard");
  }
  syncer_ = std::thread([this, sync_every_s] { sync_loop(sync_every_s); });
}

TensorBoardWriter::~TensorBoardWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (syncer_.joinable()) syncer_.join();
  if (fd_ >= 0) {
    if (dirty_.exchange(false)) ::fdatasync(fd_);
    ::close(fd_);
  }
}

void TensorBoardWriter::sync_loop(double every_s) {
  const auto period = std::chrono::duration<double>(every_s);
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    if (!dirty_.exchange(false)) continue;
    lock.unlock();  // the training thread never waits for the sync
    ::fdatasync(fd_);
    ++syncs_;
    lock.lock();
  }
}

void TensorBoardWriter::session_start(int64_t step) { append(tb::session_start_event(tb::wall_time_now(), step)); }

void TensorBoardWriter::scalars(int64_t step, const std::vector<tb::Scalar>& values) {
  append(tb::scalars_event(tb::wall_time_now(), step, values));
}

void TensorBoardWriter::text(int64_t step, const std::string& tag, const std::string& markdown) {
  append(tb::text_event(tb::wall_time_now(), step, tag, markdown));
}

void TensorBoardWriter::append(const std::string& event) {
  if (fd_ < 0) return;
  const std::string record = tfrecord::frame(event);
  const int err = append_whole(fd_, record);
  if (!err) {
    ++written_;
    dirty_ = true;
    return;
  }
  if (lost_++ == 0) {
    error_ = std::strerror(err);
    if (written_ > 0)
      log_warn("cannot append to " + path_ + ": " + error_ +
               "; TensorBoard records are being lost (counted in run.json as tensorboard_records_lost; "
               "metrics.jsonl is unaffected). Free space on that file system");
  }
}

}  // namespace cnnscale
