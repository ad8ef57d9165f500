// test_tensorboard.cpp — TensorBoard event files without MPI: the TFRecord framing and
// CRC-32C on known bytes, the Event encodings byte for byte against TensorBoard's own
// protobuf classes, and the writer (one new file per process run, the records read
// back with both CRCs checked, a torn record cut back off, the background fdatasync,
// errors naming the directory), and --tensorboard/--no-tensorboard.
//
// Every expected byte string was computed outside cnnscale, with PyPI tensorboard 2.21
// (its event_pb2/summary_pb2 and plugins.text.summary_v2.text_pb) and python3-crcmod's
// predefined 'crc-32c', e.g.:
//   c = crcmod.predefined.mkCrcFun('crc-32c')
//   mask = lambda x: ((((x >> 15) | (x << 17)) & 0xffffffff) + 0xa282ead8) & 0xffffffff
//   L = struct.pack('<Q', len(p)); L + struct.pack('<I', mask(c(L))) + p + struct.pack('<I', mask(c(p)))
//   event_pb2.Event(wall_time=1.5, file_version='brain.Event:2').SerializeToString()
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "common/user_error.hpp"
#include "train/tensorboard.hpp"
#include "train/tfrecord.hpp"
#include "train/train_options.hpp"

namespace fs = std::filesystem;
using namespace cnnscale;
using cnnscale::test::user_error_of;

namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) out += std::string{digits[c >> 4], digits[c & 15]};
  return out;
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/cnnscale-tb-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(TfRecord, Crc32cOfTheCheckString) {
  // The CRC catalogue's check value of CRC-32/ISCSI (Castagnoli).
  EXPECT_EQ(tfrecord::crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(tfrecord::crc32c("", 0), 0u);
  // crcmod: mask(c('123456789')) = 0xc78ab0e5
  EXPECT_EQ(tfrecord::masked_crc32c("123456789", 9), 0xC78AB0E5u);
  EXPECT_EQ(tfrecord::mask(0xE3069283u), 0xC78AB0E5u);
}

TEST(TfRecord, FramesKnownRecords) {
  EXPECT_EQ(hex(tfrecord::frame("")), "000000000000000029039807d8ea82a2");
  EXPECT_EQ(hex(tfrecord::frame("hello")), "0500000000000000eab2043e68656c6c6fbb1f1c19");
}

TEST(TensorBoardEvent, EncodesAsTensorBoardsOwnClasses) {
  // event_pb2.Event(wall_time=1.5, file_version="brain.Event:2")
  EXPECT_EQ(hex(tb::file_version_event(1.5)), "09000000000000f83f1a0d627261696e2e4576656e743a32");
  // event_pb2.Event(wall_time=1.5, step=7); e.session_log.status = SessionLog.START
  EXPECT_EQ(hex(tb::session_start_event(1.5, 7)), "09000000000000f83f10073a020801");
  // Event(wall_time=2.25, step=42) with summary values (train/loss, 0.5), (train/lr, 0.1)
  EXPECT_EQ(hex(tb::scalars_event(2.25, 42, {{"train/loss", 0.5}, {"train/lr", 0.1}})),
            "090000000000000240102a2a240a110a0a747261696e2f6c6f7373150000003f0a0f0a08747261696e2f6c7215cdcccc3d");
  // Event(wall_time=3.0, step=1, summary=text_summary_v2.text_pb("options", "| a | b |"))
  EXPECT_EQ(hex(tb::text_event(3.0, 1, "options", "| a | b |")),
            "09000000000000084010012a260a240a076f7074696f6e73420f0807120042097c2061207c2062207c4a080a060a0474657874");
}

TEST(TensorBoardEvent, DecodesWhatItEncodes) {
  const tb::DecodedEvent d = tb::decode_event(tb::scalars_event(10.5, 3, {{"a", 1.25}, {"b", -2}}));
  EXPECT_EQ(d.wall_time, 10.5);
  EXPECT_EQ(d.step, 3);
  ASSERT_EQ(d.scalars.size(), 2u);
  EXPECT_EQ(d.scalars[0].tag, "a");
  EXPECT_EQ(d.scalars[0].value, 1.25);
  EXPECT_EQ(d.scalars[1].value, -2);
  const tb::DecodedEvent t = tb::decode_event(tb::text_event(1, 2, "options", "x"));
  ASSERT_EQ(t.texts.size(), 1u);
  EXPECT_EQ(t.texts[0], (std::pair<std::string, std::string>{"options", "x"}));
  EXPECT_NE(user_error_of([] { tb::decode_event(std::string("\xff\xff\xff", 3)); }), "");
}

TEST(TensorBoardWriter, OneNewFilePerRunReadBackWithCrcs) {
  TempDir tmp;
  const std::string dir = tmp.path + "/run/tb";  // created with parents
  std::string first, second;
  {
    TensorBoardWriter w(dir, "node7");
    first = w.path();
    w.session_start(5);
    w.scalars(5, {{"train/loss", 2.5}, {"train/lr", 0.125}});
    w.text(5, "options", "| `seed` | `1` |");
    EXPECT_EQ(w.records_written(), 4);
    EXPECT_EQ(w.records_lost(), 0);
    // Readable before close: no user-space buffer.
    EXPECT_EQ(tfrecord::read_file(first).size(), 4u);
    // A second process run (here in the same second) gets a file of its own, sorting after.
    TensorBoardWriter w2(dir, "node7");
    second = w2.path();
  }
  EXPECT_LT(first, second);
  EXPECT_TRUE(
      std::regex_match(fs::path(first).filename().string(), std::regex(R"(events\.out\.tfevents\.[0-9]{10}\.node7)")))
      << first;
  EXPECT_EQ(event_files(dir).size(), 2u);
  const std::vector<std::string> recs = tfrecord::read_file(first);
  ASSERT_EQ(recs.size(), 4u);
  const tb::DecodedEvent v = tb::decode_event(recs[0]);
  EXPECT_EQ(v.file_version, "brain.Event:2");
  const double now = tb::wall_time_now();
  EXPECT_GT(v.wall_time, now - 600);
  EXPECT_LE(v.wall_time, now);
  const tb::DecodedEvent s = tb::decode_event(recs[1]);
  EXPECT_EQ(s.session_status, 1);  // START
  EXPECT_EQ(s.step, 5);
  const tb::DecodedEvent sc = tb::decode_event(recs[2]);
  ASSERT_EQ(sc.scalars.size(), 2u);
  EXPECT_EQ(sc.scalars[1].tag, "train/lr");
  EXPECT_EQ(sc.scalars[1].value, 0.125);
  EXPECT_EQ(tb::decode_event(recs[3]).texts.at(0).second, "| `seed` | `1` |");
  EXPECT_EQ(tfrecord::read_file(second).size(), 1u);  // its file_version only
}

// TensorBoard reads a directory's files in name order: a new file sorts after every file
// there, even one named by a node whose clock was ahead.
TEST(TensorBoardWriter, NewFileSortsAfterExistingOnes) {
  EXPECT_EQ(tb::event_file_time("events.out.tfevents.1795468867.vm"), 1795468867);
  EXPECT_EQ(tb::event_file_time("events.out.tfevents.1795468867.vm.12"), 1795468867);
  EXPECT_EQ(tb::event_file_time("events.out.tfevents.x.vm"), -1);
  EXPECT_EQ(tb::event_file_time("events.out.tfevents.123"), -1);
  EXPECT_EQ(tb::event_file_time("metrics.jsonl"), -1);
  TempDir tmp;
  const int64_t ahead = static_cast<int64_t>(tb::wall_time_now()) + 100;
  std::ofstream(tmp.path + "/events.out.tfevents." + std::to_string(ahead) + ".fastclock") << "";
  TensorBoardWriter w(tmp.path, "slowclock");
  EXPECT_EQ(fs::path(w.path()).filename().string(), "events.out.tfevents." + std::to_string(ahead + 1) + ".slowclock");
  EXPECT_EQ(event_files(tmp.path).back(), w.path());
}

TEST(TensorBoardWriter, ReaderRejectsADamagedRecord) {
  TempDir tmp;
  std::string path;
  {
    TensorBoardWriter w(tmp.path, "h");
    w.scalars(1, {{"x", 1}});
    path = w.path();
  }
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-6, std::ios::end);  // inside the last record's data
  f.put('\x7f');
  f.close();
  EXPECT_NE(user_error_of([&] { tfrecord::read_file(path); }).find("the data's CRC does not match"), std::string::npos);
  fs::resize_file(path, fs::file_size(path) - 3);
  EXPECT_NE(user_error_of([&] { tfrecord::read_file(path); }).find("cut short"), std::string::npos);
}

// A write that fails part-way (here: the file-size limit, EFBIG after a short write) is
// cut back off, counted, and the next record follows the last whole one.
TEST(TensorBoardWriter, TornRecordIsCutBack) {
  TempDir tmp;
  TensorBoardWriter w(tmp.path, "h");
  w.scalars(1, {{"a", 1}});
  const auto before = fs::file_size(w.path());
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = before + 10;
  struct sigaction ign {
  }, prev{};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGXFSZ, &ign, &prev);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  w.scalars(2, {{"a long tag so that the record is longer than ten bytes", 2}});
  setrlimit(RLIMIT_FSIZE, &old);
  sigaction(SIGXFSZ, &prev, nullptr);
  EXPECT_EQ(fs::file_size(w.path()), before);
  EXPECT_EQ(w.records_lost(), 1);
  w.scalars(3, {{"a", 3}});
  const std::vector<std::string> recs = tfrecord::read_file(w.path());
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(tb::decode_event(recs[2]).step, 3);
}

TEST(TensorBoardWriter, SyncsInTheBackgroundOnlyAfterWrites) {
  TempDir tmp;
  TensorBoardWriter w(tmp.path, "h", 0.02);
  const auto wait_for_sync = [&](int64_t more_than) {
    for (int i = 0; i < 200 && w.syncs() <= more_than; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return w.syncs();
  };
  const int64_t after_open = wait_for_sync(0);  // the file_version record
  EXPECT_GE(after_open, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // nothing written: no sync
  EXPECT_EQ(w.syncs(), after_open);
  w.scalars(1, {{"a", 1}});
  EXPECT_GT(wait_for_sync(after_open), after_open);
}

TEST(TensorBoardWriter, UnwritableDirectoryIsNamed) {
  TempDir tmp;
  std::ofstream(tmp.path + "/file") << "x";
  const std::string msg = user_error_of([&] { TensorBoardWriter w(tmp.path + "/file/tb", "h"); });
  EXPECT_NE(msg.find("TensorBoard directory (--tensorboard) '" + tmp.path + "/file/tb'"), std::string::npos) << msg;
}

TEST(TensorBoardOptions, DirectoryDefaultsAndSwitch) {
  TrainOptions o;
  o.data.synthetic = true;
  EXPECT_EQ(o.tensorboard_dir(), "");
  o.run_dir = "runs/a";
  EXPECT_EQ(o.tensorboard_dir(), "runs/a/tb");
  o.tensorboard = "/shared/tb/a";
  EXPECT_EQ(o.tensorboard_dir(), "/shared/tb/a");
  o.no_tensorboard = true;
  EXPECT_NE(
      user_error_of([&] { validate(o); }).find("--tensorboard /shared/tb/a and --no-tensorboard exclude each other"),
      std::string::npos);
  o.tensorboard.clear();
  EXPECT_EQ(user_error_of([&] { validate(o); }), "");
  EXPECT_EQ(o.tensorboard_dir(), "");
}
