// test_batch_hook — BatchSource::set_batch_hook on the real sources (HDF5 fixture and
// synthetic): the hook runs once per made batch, in the prefetcher's thread (the
// caller's with --prefetch 0), in (epoch, step) order; the batch next() hands out
// carries the ticket the hook returned for exactly that batch (same position, images,
// labels and ids); seek and changing the hook mid-stream skip nothing and drop nothing
// but made-ahead batches (made again); a throwing hook is rethrown by next().
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "data/fixture.hpp"
#include "data/open_source.hpp"

using namespace cnnscale;
using namespace cnnscale::test;
namespace fs = std::filesystem;

namespace {

uint64_t digest(const Batch& b) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* p, size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  };
  mix(b.images.data(), b.images.size() * sizeof(float));
  mix(b.labels.data(), b.labels.size() * sizeof(int32_t));
  mix(b.sample_ids.data(), b.sample_ids.size() * sizeof(int64_t));
  return h;
}

// What the hook saw, by ticket.
struct Log {
  struct Entry {
    std::thread::id thread;
    int epoch;
    int64_t step, count;
    uint64_t digest;
  };
  std::mutex m;
  std::vector<Entry> entries;  // index = ticket - base
  int64_t base = 0;
  BatchHook hook() {
    return [this](const Batch& b) {
      std::lock_guard<std::mutex> lk(m);
      entries.push_back({std::this_thread::get_id(), b.epoch, b.step_in_epoch, b.count, digest(b)});
      return base + static_cast<int64_t>(entries.size()) - 1;
    };
  }
};

int64_t position(int epoch, int64_t step, int64_t steps) { return epoch * steps + step; }

// Consumes `count` batches and checks each against its ticket; returns the positions.
std::vector<int64_t> consume(BatchSource& src, Log& log, int count, bool threaded, int64_t& last_ticket) {
  std::vector<int64_t> pos;
  Batch b;
  for (int i = 0; i < count; ++i) {
    src.next(b);
    std::lock_guard<std::mutex> lk(log.m);
    EXPECT_GE(b.ticket, log.base);
    EXPECT_GT(b.ticket, last_ticket) << "tickets follow the order batches are handed out";
    last_ticket = b.ticket;
    const size_t k = static_cast<size_t>(b.ticket - log.base);
    if (k >= log.entries.size()) {
      ADD_FAILURE() << "ticket " << b.ticket << " was never returned by the hook";
      continue;
    }
    const Log::Entry& e = log.entries[k];
    EXPECT_EQ(e.epoch, b.epoch);
    EXPECT_EQ(e.step, b.step_in_epoch);
    EXPECT_EQ(e.count, b.count);
    EXPECT_EQ(e.digest, digest(b)) << "the batch handed out is the one its ticket was made for";
    if (threaded) EXPECT_NE(e.thread, std::this_thread::get_id()) << "the hook runs in the prefetcher's thread";
    else EXPECT_EQ(e.thread, std::this_thread::get_id());
    pos.push_back(position(b.epoch, b.step_in_epoch, src.steps_per_epoch()));
  }
  return pos;
}

// Hook calls between two resets of the log are at consecutive positions.
void expect_hook_in_order(Log& log, int64_t steps) {
  std::lock_guard<std::mutex> lk(log.m);
  for (size_t i = 1; i < log.entries.size(); ++i)
    EXPECT_EQ(position(log.entries[i].epoch, log.entries[i].step, steps),
              position(log.entries[i - 1].epoch, log.entries[i - 1].step, steps) + 1)
        << "hook call " << i;
}

void expect_consecutive(const std::vector<int64_t>& pos, int64_t first) {
  for (size_t i = 0; i < pos.size(); ++i) EXPECT_EQ(pos[i], first + static_cast<int64_t>(i)) << "batch " << i;
}

class BatchHookTest : public ::testing::TestWithParam<int> {
 protected:
  static void SetUpTestSuite() {
    root_ = make_temp_dir("batch_hook");
    write_fixture(root_ + "/fixture.h5", 103, 9, SampleShape{2, 3, 5}, 7);  // 103 = 8*12 + 7: a short last batch
    prep_fixture(root_ + "/fixture.h5", root_ + "/ds", 3, 1);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static std::string root_;
};
std::string BatchHookTest::root_;

DataOptions options(const std::string& dir, int prefetch, bool synthetic) {
  DataOptions o;
  o.dir = dir;
  o.synthetic = synthetic;
  o.synthetic_samples = 100;
  o.synthetic_test_samples = 10;
  o.batch_per_rank = 12;
  o.seed = 5;
  o.drop_last = synthetic;  // the HDF5 source: the short last batch too
  o.prefetch = prefetch;
  return o;
}

void run_scenario(const DataOptions& o) {
  const bool threaded = o.prefetch > 0;
  DataSources src = open_data(o, 0, 1);
  BatchSource& s = *src.train;
  const int64_t steps = s.steps_per_epoch();
  Log log;
  s.set_batch_hook(log.hook());
  s.seek(0, 0);
  int64_t last = -1;
  // Past the end of an epoch (the short last batch) into the next.
  std::vector<int64_t> pos = consume(s, log, static_cast<int>(steps) + 3, threaded, last);
  expect_consecutive(pos, 0);
  expect_hook_in_order(log, steps);

  // Resume elsewhere: the next batch is the sought one, with a fresh ticket.
  s.seek(2, 1);
  {
    std::lock_guard<std::mutex> lk(log.m);
    log.base += static_cast<int64_t>(log.entries.size());
    log.entries.clear();
  }
  pos = consume(s, log, 4, threaded, last);
  expect_consecutive(pos, position(2, 1, steps));
  expect_hook_in_order(log, steps);

  // A new hook mid-stream: nothing skipped; later batches carry the new hook's tickets.
  Log other;
  other.base = 1000000;
  s.set_batch_hook(other.hook());
  pos = consume(s, other, 5, threaded, last);
  expect_consecutive(pos, position(2, 1, steps) + 4);
  expect_hook_in_order(other, steps);

  // Removed: tickets are -1 again, positions go on.
  s.set_batch_hook({});
  Batch b;
  s.next(b);
  EXPECT_EQ(b.ticket, -1);
  EXPECT_EQ(position(b.epoch, b.step_in_epoch, steps), position(2, 1, steps) + 9);

  // A throwing hook fails the next() that would have received its batch.
  s.set_batch_hook([](const Batch&) -> int64_t { throw std::runtime_error("hook failed"); });
  EXPECT_THROW(s.next(b), std::runtime_error);
  s.set_batch_hook({});
  s.seek(0, 0);
  s.next(b);
  EXPECT_EQ(b.epoch, 0);
  EXPECT_EQ(b.step_in_epoch, 0);
}

TEST_P(BatchHookTest, Hdf5Source) { run_scenario(options(root_ + "/ds", GetParam(), false)); }
TEST_P(BatchHookTest, SyntheticSource) { run_scenario(options("", GetParam(), true)); }

INSTANTIATE_TEST_SUITE_P(Prefetch, BatchHookTest, ::testing::Values(0, 1, 3));

}  // namespace
