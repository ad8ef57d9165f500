// ShmAllreduce under mpiexec (all ranks on this one node): every element equals the sum
// over ranks in rank order, bitwise, on every rank; segments of awkward sizes (empty,
// shorter than one slice per rank, not multiples of 16); ranks that reach a segment at
// different times; buffers refilled at once after finish() (no rank may still read
// them); and the cases where it must decline.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "comm/shm_allreduce.hpp"
#include "nn/rng.hpp"

using namespace cnnscale;

namespace {
// Values of very different magnitudes, so that the order of the additions shows.
float value(int rank, int round, size_t i) {
  const uint64_t h = nn::hash_combine(nn::hash_combine(uint64_t(rank), uint64_t(round)), i);
  const float u = static_cast<float>(h >> 40) / static_cast<float>(1u << 24) - 0.5f;
  return u * static_cast<float>(1u << ((h >> 8) % 20));
}
std::vector<std::pair<size_t, size_t>> segments(const std::vector<size_t>& ends) {
  std::vector<std::pair<size_t, size_t>> s;
  size_t b = 0;
  for (size_t e : ends) s.emplace_back(b, e), b = e;
  return s;
}
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &r);
  return r;
}

// group > 0: ranks split into "nodes" of `group` consecutive ranks (they share memory,
// being on this one machine), so slices also cross "nodes" through MPI. The reference
// is then the sum over nodes of each node's rank-order sum, in node order (two nodes:
// MPI's a + b is the same either way round).
void run_rounds(const std::vector<size_t>& ends, int rounds, bool stagger, int group = 0) {
  const size_t count = ends.back();
  const int me = world_rank(), W = world_size();
  const int L = group > 0 ? group : W, nodes = W / L;
  MPI_Comm node = MPI_COMM_NULL;
  if (group > 0) MPI_Comm_split(MPI_COMM_WORLD, me / group, me, &node);
  std::string why;
  auto ar = ShmAllreduce::create(MPI_COMM_WORLD, count, segments(ends), &why, node);
  if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
  ASSERT_NE(ar, nullptr) << why;  // the same outcome on every rank (decided collectively)
  EXPECT_EQ(ar->local_size(), L);  // EXPECT: a rank that returned early would hang the others
  EXPECT_EQ(ar->nodes(), nodes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ar->buffer()) % 64, 0u);
  for (int round = 0; round < rounds; ++round) {
    float* buf = ar->buffer();
    for (size_t i = 0; i < count; ++i) buf[i] = value(me, round, i);  // right after the last finish()
    for (size_t s = 0; s < ends.size(); ++s) {
      if (stagger) std::this_thread::sleep_for(std::chrono::microseconds(300 * ((me + round + int(s)) % W)));
      ar->ready(s);
      ar->progress();
    }
    ar->finish();
    size_t wrong = 0, first = count;
    for (size_t i = 0; i < count; ++i) {
      float ref = 0;
      for (int nd = 0; nd < nodes; ++nd) {
        float local = value(nd * L, round, i);
        for (int k = 1; k < L; ++k) local += value(nd * L + k, round, i);
        ref = nd == 0 ? local : ref + local;
      }
      if (std::memcmp(&ref, &buf[i], sizeof(float)) != 0 && wrong++ == 0) first = i;
    }
    EXPECT_EQ(wrong, 0u) << "round " << round << ", first wrong element " << first;
    // Bitwise identical on every rank: compare with rank 0's copy.
    std::vector<float> r0(buf, buf + count);
    MPI_Bcast(r0.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(std::memcmp(r0.data(), buf, count * sizeof(float)), 0) << "round " << round;
  }
}
}  // namespace

TEST(ShmAllreduce, GradientSizedBucketsSumExactly) {
  run_rounds({1000000 + 3, 1199882}, 3, false);  // mnist_cnn's two buckets
}

TEST(ShmAllreduce, AwkwardSegmentsSumExactly) {
  run_rounds({1, 1, 50, 50 + 16 * 4 + 3, 4099, 4099, (1u << 20) + 5}, 4, false);
}

TEST(ShmAllreduce, RanksReadyAtDifferentTimes) {
  run_rounds({777, 20000, 20001, 300000}, 5, true);
}

TEST(ShmAllreduce, DeclinesWhatItCannotDo) {
  std::string why;
  EXPECT_EQ(ShmAllreduce::create(MPI_COMM_SELF, 100, segments({100}), &why), nullptr);
  EXPECT_EQ(why, "one rank");
  EXPECT_EQ(ShmAllreduce::create(MPI_COMM_WORLD, 100, segments({60}), &why), nullptr);
  EXPECT_EQ(why, "segments do not cover the buffer");
  EXPECT_EQ(ShmAllreduce::create(MPI_COMM_WORLD, 100, {{0, 40}, {50, 100}}, &why), nullptr);
  EXPECT_EQ(why, "segments are not consecutive");
}

TEST(ShmAllreduce, AcrossNodesThroughMpi) {
  if (world_size() % 2 != 0 || world_size() < 4) GTEST_SKIP() << "needs 2 or more pairs of ranks";
  run_rounds({1, 1, 50, 4099, (1u << 18) + 5}, 3, false, 2);
  run_rounds({777, 20000, 300000}, 3, true, 2);
}
