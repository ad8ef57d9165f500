// The Trainer in-process under mpiexec, on a world from start_world() (MPI backend,
// synthetic data, a small CNN): setup, a few steps with finite losses and bitwise
// identical replicas after each; stop after k steps and resume into a new Trainer equals
// the uninterrupted run bit for bit; a non-finite loss under --on-nan stop is a
// CollectiveError on every rank. Batch norm: by default (DDP's broadcast_buffers) every
// rank's running statistics after each step are bitwise those rank 0 computes from its
// own batch, and the checkpoint holds them; with --sync-bn every rank computes the same
// ones from the global batch without a broadcast. An error that unwinds through the
// Trainer (CNNSCALE_INJECT_ERROR: during backward, buckets in flight) aborts the data
// plane once, before the teardown; a normal end or a caught error aborts nothing.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "comm/world.hpp"
#include "data/open_source.hpp"
#include "nn/host_params.hpp"
#include "train/checkpoint.hpp"
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

namespace {

// The world's data plane, counting abort() instead of passing it on (the world stays
// usable for the other tests).
class AbortCountingComm final : public Communicator {
 public:
  explicit AbortCountingComm(Communicator& c) : c_(c) {}
  Backend backend() const override { return c_.backend(); }
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  bool device_buffers() const override { return c_.device_buffers(); }
  void allreduce_sum(void* buf, size_t count, DType t) override { c_.allreduce_sum(buf, count, t); }
  std::unique_ptr<PendingReduce> allreduce_sum_async(void* buf, size_t count, DType t) override {
    return c_.allreduce_sum_async(buf, count, t);
  }
  void broadcast(void* buf, size_t bytes, int root) override { c_.broadcast(buf, bytes, root); }
  void barrier() override { c_.barrier(); }
  void progress() override { c_.progress(); }
  void abort() override { ++aborts; }
  int aborts = 0;

 private:
  Communicator& c_;
};

}  // namespace

TEST_F(TrainerMpi, AnErrorUnwindingTheTrainerAbortsTheDataPlaneOnce) {
  AbortCountingComm comm(*world_->comm);
  TrainOptions o = small_run();
  o.first_bucket_mb = o.bucket_mb = 0.0001;  // several buckets: some in flight when the error comes
  {
    Trainer t(o, world_->ctx, comm, *world_->control);
    t.setup();
    t.step();
    t.step();
  }
  EXPECT_EQ(comm.aborts, 0) << "a Trainer that ends normally must not abort the data plane";
  {
    Trainer t(small_run(), world_->ctx, comm, *world_->control);
    t.setup();
    EXPECT_THROW(fail("caught inside the Trainer's lifetime"), UserError);
  }
  EXPECT_EQ(comm.aborts, 0) << "an error caught while the Trainer lives is not an unwinding through it";
  // Every rank fails at step 2 (each names itself, so that no rank waits for another), as
  // one rank would alone.
  const std::string inject = std::to_string(world_->ctx.rank) + ":2";
  ASSERT_EQ(setenv("CNNSCALE_INJECT_ERROR", inject.c_str(), 1), 0);
  std::string what;
  try {
    Trainer t(o, world_->ctx, comm, *world_->control);
    unsetenv("CNNSCALE_INJECT_ERROR");
    t.setup();
    t.step();
    EXPECT_EQ(comm.aborts, 0);
    t.step();
    ADD_FAILURE() << "CNNSCALE_INJECT_ERROR=" << inject << " did not fail step 2";
  } catch (const UserError& e) {
    what = e.what();
  }
  unsetenv("CNNSCALE_INJECT_ERROR");
  EXPECT_EQ(comm.aborts, 1);
  EXPECT_NE(what.find("rank " + std::to_string(world_->ctx.rank) + " on "), std::string::npos) << what;
  EXPECT_NE(what.find("injected error during backward of step 2"), std::string::npos) << what;
  // The world's data plane still sums (MPI's abort is the Trainer's business only here).
  float v = 1.f;
  world_->comm->allreduce_sum(&v, 1, DType::f32);
  EXPECT_EQ(v, static_cast<float>(world_->ctx.size));
}

namespace {

const char* kBnModel = "conv(4,3,1,1) bn relu maxpool(2) conv(6,3,1,1) bn relu flatten linear(10)";

// The non-trainable elements (running_mean, running_var, num_batches_tracked).
std::vector<float> buffers_of(const Model& m, const std::vector<float>& flat) {
  std::vector<float> b;
  for (const auto& p : m.params())
    if (!p.trainable) b.insert(b.end(), flat.begin() + p.offset, flat.begin() + p.offset + p.numel);
  return b;
}

}  // namespace

TEST_F(TrainerMpi, BatchNormBuffersFollowRankZeroAndReachTheCheckpoint) {
  const std::string dir = shared_tmp_dir();
  ASSERT_FALSE(dir.empty());
  const int rank = world_->ctx.rank, size = world_->ctx.size;
  TrainOptions o = small_run();
  o.model = kBnModel;
  o.max_steps = 4;
  o.run_dir = dir;
  Trainer t(o, *world_);
  t.setup();
  EXPECT_FALSE(t.resume());
  // Rank 0's batches (and this rank's own), read again: rank 0's running statistics,
  // recomputed here from the parameters before each step.
  auto rank0_src = open_train_source(o.data_options(), 0, size);
  auto own_src = open_train_source(o.data_options(), rank, size);
  auto ref = make_model(o.model, rank0_src->shape(), rank0_src->classes());
  ref->prepare(o.batch_size, Precision::fp32);
  Batch b0, mine;
  bool own_differs = false;
  while (!t.done()) {
    const std::vector<float> before = params(t);
    const int64_t step = t.steps_done();
    t.step();
    const std::vector<float> after = params(t);
    auto stats_from = [&](const Batch& b) {
      ref->copy_params_from_host(before.data());
      StepContext ctx;
      ctx.seed = o.seed;
      ctx.step = step;
      ctx.sample_ids = b.sample_ids.data();
      ctx.loss_scale = 1.f / static_cast<float>(o.batch_size * size);
      ref->forward_backward(b.images.data(), b.labels.data(), b.count, ctx, {});
      std::vector<float> p(ref->param_count());
      ref->copy_params_to_host(p.data());
      return buffers_of(*ref, p);
    };
    rank0_src->next(b0);
    own_src->next(mine);
    const std::vector<float> got = buffers_of(t.model(), after), want = stats_from(b0);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
        << "rank " << rank << " after step " << step + 1 << ": running statistics are not rank 0's";
    if (rank != 0) own_differs |= stats_from(mine) != want;
    EXPECT_TRUE(t.replicas_identical()) << "after step " << step + 1;
  }
  if (rank != 0) {
    EXPECT_TRUE(own_differs) << "degenerate test: this rank's own batches give rank 0's statistics";
  }
  t.summarize();
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {  // the checkpoint holds them
    auto m = make_model(o.model, rank0_src->shape(), rank0_src->classes());
    auto opt = make_optimizer(o.optimizer, *m);
    read_checkpoint(dir + "/checkpoints/step-00000004.h5", *m, *opt);
    std::vector<float> p(m->param_count());
    m->copy_params_to_host(p.data());
    EXPECT_EQ(buffers_of(*m, p), buffers_of(t.model(), params(t)));
    std::filesystem::remove_all(dir);
  }
}

TEST_F(TrainerMpi, SyncBnGivesEveryRankTheSameStatisticsWithoutBroadcast) {
  TrainOptions o = small_run();
  o.model = kBnModel;
  o.max_steps = 3;
  o.sync_bn = true;
  Trainer t(o, *world_);
  t.setup();
  while (!t.done()) {
    t.step();
    EXPECT_TRUE(t.replicas_identical()) << "after step " << t.steps_done();
  }
  std::vector<float> mine = buffers_of(t.model(), params(t)), root = mine;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_EQ(mine, root);
  EXPECT_NE(mine[0], 0.f);  // running statistics moved (no longer the initial zeros/ones)
}
