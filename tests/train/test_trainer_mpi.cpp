// The Trainer in-process under mpiexec, on a world from start_world() (MPI backend,
// synthetic data, a small CNN): setup, a few steps with finite losses and bitwise
// identical replicas after each; stop after k steps and resume into a new Trainer equals
// the uninterrupted run bit for bit; a non-finite loss under --on-nan stop is a
// CollectiveError on every rank.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "comm/world.hpp"
#include "nn/host_params.hpp"
#include "train/trainer.hpp"
#include "util/error.hpp"

using namespace cnnscale;

namespace {

class TrainerMpi : public ::testing::Test {
 protected:
  // One world for the whole binary: torn down before main() finalises MPI.
  static void SetUpTestSuite() {
    WorldOptions wo;
    wo.backend = Backend::mpi;
    world_ = std::make_unique<World>(start_world(wo));
  }
  static void TearDownTestSuite() { world_.reset(); }

  static TrainOptions small_run() {
    TrainOptions o;
    o.data.synthetic = true;
    o.data.synthetic_samples = 512;
    o.model = "conv(4,3) relu maxpool(2) dropout(0.25) flatten linear(10)";
    o.batch_size = 8;
    o.max_steps = 6;
    o.seed = 5;
    o.lr.lr = 0.05;
    o.optimizer.momentum = 0.9;
    o.evaluate = false;
    o.log_every = 1000;
    return o;
  }

  // This rank's parameters, host copy.
  static std::vector<float> params(Trainer& t) {
    std::vector<float> p(t.model().param_count());
    copy_params_to_host(t.model(), p.data());
    return p;
  }

  // A fresh directory every rank agrees on (rank 0 creates it).
  static std::string shared_tmp_dir() {
    char path[256] = {0};
    if (world_->ctx.rank == 0) {
      const auto pattern = std::filesystem::temp_directory_path() / "cnnscale-trainer-XXXXXX";
      std::snprintf(path, sizeof(path), "%s", pattern.c_str());
      if (!mkdtemp(path)) path[0] = 0;
    }
    MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD);
    return path;
  }

  static std::unique_ptr<World> world_;
};

std::unique_ptr<World> TrainerMpi::world_;

}  // namespace

TEST_F(TrainerMpi, StepsKeepReplicasIdenticalAndLossesFinite) {
  Trainer t(small_run(), *world_);
  t.setup();
  EXPECT_FALSE(t.resume());  // no --run-dir: nothing to resume from
  EXPECT_TRUE(t.replicas_identical()) << "rank 0's initial parameters are broadcast";
  const std::vector<float> before = params(t);
  for (int i = 0; i < 3; ++i) {
    const StepResult r = t.step();
    EXPECT_EQ(r.step, i + 1);
    EXPECT_TRUE(std::isfinite(r.loss)) << "step " << r.step;
    EXPECT_GT(r.loss, 0.0);
    EXPECT_FALSE(r.skipped);
    EXPECT_FALSE(r.stopped);
    EXPECT_TRUE(t.replicas_identical()) << "after step " << r.step;
  }
  // Bitwise equal to rank 0's, compared element by element, and moved by training.
  std::vector<float> mine = params(t), root = mine;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(mine.data(), root.data(), mine.size() * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(mine.data(), before.data(), mine.size() * sizeof(float)), 0);
  while (!t.done()) t.step();
  EXPECT_EQ(t.steps_done(), 6);
  EXPECT_EQ(t.total_steps(), 6);
  t.summarize();
}

TEST_F(TrainerMpi, StopAndResumeEqualsUninterruptedBitwise) {
  const std::string dir = shared_tmp_dir();
  ASSERT_FALSE(dir.empty());
  std::vector<float> reference;
  {
    Trainer t(small_run(), *world_);
    t.setup();
    while (!t.done()) t.step();
    reference = params(t);
  }
  TrainOptions first = small_run();
  first.max_steps = 4;
  first.run_dir = dir;
  {
    Trainer t(first, *world_);
    t.setup();
    EXPECT_FALSE(t.resume());  // an empty run directory
    while (!t.done()) t.step();
    t.summarize();
  }
  TrainOptions second = small_run();
  second.run_dir = dir;
  {
    Trainer t(second, *world_);
    t.setup();
    EXPECT_TRUE(t.resume());
    EXPECT_EQ(t.steps_done(), 4);
    while (!t.done()) t.step();
    const std::vector<float> resumed = params(t);
    ASSERT_EQ(resumed.size(), reference.size());
    EXPECT_EQ(std::memcmp(resumed.data(), reference.data(), resumed.size() * sizeof(float)), 0);
    t.summarize();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_->ctx.rank == 0) {
    std::ifstream run(dir + "/run.json");
    std::string text((std::istreambuf_iterator<char>(run)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"resumed_from\": \"" + dir + "/checkpoints/step-00000004.h5\""), std::string::npos) << text;
    std::filesystem::remove_all(dir);
  }
}

TEST_F(TrainerMpi, NonFiniteLossStopsEveryRank) {
  TrainOptions o = small_run();
  o.lr.lr = 1e12;
  o.max_steps = 20;
  Trainer t(o, *world_);
  t.setup();
  EXPECT_THROW(
      {
        while (!t.done()) t.step();
      },
      CollectiveError);
  EXPECT_LT(t.steps_done(), 20);
}
