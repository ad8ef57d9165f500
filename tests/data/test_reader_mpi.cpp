// The HDF5 reader under mpiexec: every rank reads its own slice of a small prepped
// data set; gathered on rank 0 the slices are exactly the sampler's global batches
// (the same for any W), with the right image bytes; evaluation sees each test sample
// once; a bad --data directory is one CollectiveError on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <map>

#include "data/fixture.hpp"
#include "data/open_source.hpp"
#include "data/reader_check.hpp"
#include "data/sampler.hpp"
#include "util/error.hpp"

using namespace cnnscale;
using namespace cnnscale::test;
namespace fs = std::filesystem;

namespace {
constexpr int64_t kN = 301, kTest = 53, kG = 24;

int rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world() {
  int w;
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  return w;
}

// Rank 0 makes the data set; everyone gets its path.
std::string shared_dataset() {
  static std::string dir;
  if (!dir.empty()) return dir;
  char buf[256] = {0};
  if (rank() == 0) {
    const std::string root = make_temp_dir("reader-mpi");
    write_fixture(root + "/fixture.h5", kN, kTest, {1, 6, 6}, 10);
    prep_fixture(root + "/fixture.h5", root + "/ds", 5, 3, 8);
    std::snprintf(buf, sizeof buf, "%s/ds", root.c_str());
  }
  MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
  dir = buf;
  return dir;
}
}  // namespace

TEST(ReaderMpi, GatheredSlicesAreTheSamplersGlobalBatches) {
  const int w = world(), r = rank();
  ASSERT_EQ(kG % w, 0);
  DataOptions o;
  o.dir = shared_dataset();
  o.batch_per_rank = kG / w;
  o.seed = 11;
  auto d = open_data(o, r, w);
  Sampler ref(kN, kG, true, 11);
  ASSERT_EQ(d.train->steps_per_epoch(), ref.steps_per_epoch());
  Batch b;
  std::vector<int64_t> gathered(kG), expect;
  int64_t wrong = 0;
  for (int e = 0; e < 2; ++e)
    for (int64_t s = 0; s < ref.steps_per_epoch(); ++s) {
      d.train->next(b);
      wrong += wrong_images(b, *d.dataset);
      for (int64_t k = 0; k < b.count; ++k) wrong += b.labels[k] != b.sample_ids[k] % 10;
      MPI_Gather(b.sample_ids.data(), static_cast<int>(b.count), MPI_INT64_T, gathered.data(),
                 static_cast<int>(b.count), MPI_INT64_T, 0, MPI_COMM_WORLD);
      if (r == 0) {
        ref.global_batch_ids(e, s, expect);
        ASSERT_EQ(gathered, expect) << "epoch " << e << " step " << s;
      }
    }
  EXPECT_EQ(wrong, 0) << "images or labels that do not belong to their sample ids on rank " << r;
}

TEST(ReaderMpi, EvaluationSeesEachTestSampleOnce) {
  const int w = world(), r = rank();
  DataOptions o;
  o.dir = shared_dataset();
  o.batch_per_rank = 4;
  auto d = open_data(o, r, w);
  ASSERT_TRUE(d.eval);
  std::vector<int64_t> mine;
  Batch b;
  while (d.eval->next(b, 6)) mine.insert(mine.end(), b.sample_ids.begin(), b.sample_ids.end());
  EXPECT_EQ(static_cast<int64_t>(mine.size()), d.eval->local_samples());
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(w), displs(w);
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int i = 0; i < w; ++i) {
    displs[i] = total;
    total += counts[i];
  }
  std::vector<int64_t> all(r == 0 ? total : 0);
  MPI_Gatherv(mine.data(), n, MPI_INT64_T, all.data(), counts.data(), displs.data(), MPI_INT64_T, 0, MPI_COMM_WORLD);
  if (r == 0) {
    EXPECT_EQ(total, kTest);
    std::map<int64_t, int> seen;
    for (auto id : all) ++seen[id];
    EXPECT_EQ(static_cast<int64_t>(seen.size()), kTest);
    for (auto& [id, c] : seen) EXPECT_EQ(c, 1) << "test sample " << id;
  }
}

TEST(ReaderMpi, MissingDirectoryIsOneCollectiveError) {
  DataOptions o;
  o.dir = "/nonexistent/cnnscale-data";
  bool collective = false;
  try {
    open_data(o, rank(), world());
  } catch (const CollectiveError& e) {
    collective = std::string(e.what()).find("/nonexistent/cnnscale-data does not exist") != std::string::npos;
  } catch (const UserError&) {
  }
  EXPECT_TRUE(collective);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) fs::remove_all(fs::path(shared_dataset()).parent_path());
}
