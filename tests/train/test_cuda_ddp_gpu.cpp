// test_cuda_ddp_gpu.cpp — data-parallel training on GPUs under mpiexec, over two data
// planes: NCCL (one rank per device) and the host data plane (issue 38: each bucket
// staged through pinned host memory and summed by MPI, comm/staged_communicator.hpp;
// the ranks may share one GPU, each its own CUDA context and copy stream).
// mnist_cnn (dropout included), global batch 8 split over the ranks, bucketed allreduce
// started from the grad-ready callback (the plane's stream ordered after the model's),
// CUDA SGD with momentum. After each of 2 steps: every rank's parameters are bitwise
// identical, and equal (fp32 tolerance) to a 1-rank CPU run with the whole batch. And
// torchvision's resnet18 (batch norm: local statistics, so the peer is the same split on
// the CPU): one GPU step summed over the plane equals the MPI step of the CPU models on
// the same slices. And the Trainer itself (its pipelined GPU step: the step agreement
// during backward, gradient sums ended without a host wait (NCCL) or waited for by the
// host (host plane), the model's queue waiting for the plane's, the optimizer enqueued,
// device-clock timings) on an NCCL world and on a host-plane world (start_world with
// --device cuda --backend mpi): parameters bitwise equal across ranks and equal (fp32
// tolerance) to the CPU model's Trainer on the MPI backend with the same options.
// The NCCL cases SKIP without one device per rank; the host-plane cases need one device
// (every rank on ordinal 0; the Trainer's world binds as `cnnscale train` does, sharing
// the GPU when there is one). The host-plane cases are NOT YET RUN ON A GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/cuda/nccl_communicator.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/staged_communicator.hpp"
#include "comm/world.hpp"
#include "train/trainer.hpp"
#include "nn/cuda_model.hpp"
#include "nn/rng.hpp"
#include "train/cuda_optimizer.hpp"
#include "train/grad_sync.hpp"
#include "train/optimizer.hpp"

using namespace cnnscale;

namespace {

// The data plane a case sums its gradients over.
enum class Plane {
  nccl,    // NcclCommunicator, one device per rank (ordinal = rank)
  staged,  // the host data plane: MPI on pinned host copies, every rank on ordinal 0
};

const char* plane_name(Plane p) { return p == Plane::nccl ? "NCCL" : "the host data plane (MPI)"; }

// Every rank skips or none: true when the plane can run here (NCCL: each rank a device
// of its own; the host plane: a device on every rank). Sets the rank's device ordinal,
// else why not.
bool plane_available(Plane p, int rank, int size, int* device, std::string* why) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
  int min_dev = ndev;
  MPI_Allreduce(&ndev, &min_dev, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  const std::string seen = std::to_string(min_dev) + " visible, " + std::to_string(size) + " ranks";
  if (p == Plane::nccl) {
    *device = rank;
    *why = "needs one CUDA device per rank for NCCL (" + seen + ")";
    return min_dev >= size;
  }
  *device = 0;  // the ranks share it: what the host plane is for
  *why = "needs a CUDA device (" + seen + ")";
  return min_dev >= 1;
}

std::unique_ptr<Communicator> make_plane(Plane p, int device) {
  if (p == Plane::nccl) return std::make_unique<NcclCommunicator>(MPI_COMM_WORLD, device);
  return make_staged_communicator(std::make_unique<MpiCommunicator>(MPI_COMM_WORLD), make_cuda_copier(device));
}

// The same global batch on every rank: inputs uniform in [-1, 1], labels and sample ids.
struct GlobalBatch {
  std::vector<float> x;
  std::vector<int32_t> y;
  std::vector<int64_t> ids;
  StepContext ctx;
};

GlobalBatch global_batch(uint64_t seed, int step, int64_t B, const SampleShape& shape, int classes) {
  nn::SplitMix64 r(seed + step);
  GlobalBatch g;
  g.x.resize(static_cast<size_t>(B * shape.numel()));
  for (auto& v : g.x) v = static_cast<float>(r.uniform(-1, 1));
  g.y.resize(B);
  g.ids.resize(B);
  for (int64_t i = 0; i < B; ++i) g.y[i] = static_cast<int32_t>(r.next() % classes), g.ids[i] = 64 * step + i;
  g.ctx.seed = 9;
  g.ctx.step = step;
  g.ctx.loss_scale = 1.f / static_cast<float>(B);
  return g;
}

}  // namespace

// mnist_cnn over `plane`: see the header. The model's queue is ordered before the
// plane's stream for every bucket and after it once the sums (and the broadcast) have
// returned: NCCL's have completed by then, the host plane's copies back are enqueued.
void ddp_two_steps(Plane plane) {
  int rank = 0, size = 1, device = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string why;
  if (!plane_available(plane, rank, size, &device, &why)) GTEST_SKIP() << why;

  const SampleShape shape{1, 28, 28};
  const int classes = 10;
  const int64_t B = 8, local = B / size;
  ASSERT_EQ(B % size, 0);
  auto comm_owner = make_plane(plane, device);
  Communicator& comm = *comm_owner;
  ASSERT_TRUE(comm.device_buffers());
  ModelOptions fp32;
  fp32.tf32 = false;  // compared with the CPU model at 1e-4
  auto model = make_cuda_model("mnist_cnn", shape, classes, device, fp32);
  model->init_params(rank == 0 ? 21 : 1000 + rank);  // different on purpose: the broadcast must fix it
  model->order_before(comm.stream());
  comm.broadcast(model->param_data(), model->param_count() * sizeof(float), 0);
  model->wait_for(comm.stream());
  model->prepare(local, Precision::fp32);
  OptimizerOptions o;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  auto opt = make_cuda_optimizer(o, model->params(), model->param_count(), model->stream());
  std::vector<size_t> ends;
  for (const auto& p : model->params()) ends.push_back(p.offset + p.numel);
  std::sort(ends.begin(), ends.end());
  GradSync sync(comm, model->grad_data(), plan_buckets(ends, 4096, 64 << 10));
  ASSERT_GE(sync.buckets().size(), 3u);

  auto cpu = make_model("mnist_cnn", shape, classes);
  cpu->init_params(21);
  cpu->prepare(B, Precision::fp32);
  auto cpu_opt = make_optimizer(o, cpu->params(), cpu->param_count());

  const size_t P = model->param_count();
  std::vector<float> mine(P), root(P);
  for (int step = 0; step < 2; ++step) {
    GlobalBatch gb = global_batch(500, step, B, shape, classes);
    const std::vector<float>& x = gb.x;
    const std::vector<int32_t>& y = gb.y;
    const std::vector<int64_t>& ids = gb.ids;
    const StepContext ctx = gb.ctx;
    const double lr = 0.05;

    const int64_t first = rank * local;
    StepContext lctx = ctx;
    lctx.sample_ids = gb.ids.data() + first;
    const double loss = model->forward_backward(x.data() + first * shape.numel(), y.data() + first, local, lctx,
                                                [&](size_t ready_end) {
                                                  model->order_before(comm.stream());
                                                  sync.on_ready(ready_end);
                                                });
    sync.finish();
    model->wait_for(comm.stream());  // the optimizer reads the sums
    opt->step(model->param_data(), model->grad_data(), lr);
    double global_loss = 0;
    MPI_Allreduce(&loss, &global_loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

    StepContext cctx = ctx;
    cctx.sample_ids = ids.data();
    const double cpu_loss = cpu->forward_backward(x.data(), y.data(), B, cctx, {});
    cpu_opt->step(cpu->param_data(), cpu->grad_data(), lr);
    EXPECT_NEAR(global_loss, cpu_loss, 1e-4 * std::fabs(cpu_loss)) << "step " << step;

    model->copy_params_to_host(mine.data());
    root = mine;
    MPI_Bcast(root.data(), static_cast<int>(P), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(std::memcmp(root.data(), mine.data(), P * sizeof(float)), 0)
        << "rank " << rank << " parameters differ from rank 0's after step " << step << " (" << plane_name(plane)
        << ")";
    for (const auto& p : model->params()) {
      double num = 0, den = 0;
      for (size_t i = p.offset; i < p.offset + p.numel; ++i) {
        num = std::max(num, std::fabs(double(mine[i]) - cpu->param_data()[i]));
        den = std::max(den, std::fabs(double(cpu->param_data()[i])));
      }
      EXPECT_LE(num / std::max(den, 1e-30), 1e-5)
          << p.name << " vs the 1-rank CPU run, step " << step << " (" << plane_name(plane) << ")";
    }
  }
}

TEST(CudaDdp, TwoStepsRanksBitwiseEqualAndMatchOneRankCpu) { ddp_two_steps(Plane::nccl); }
TEST(CudaDdp, HostPlaneTwoStepsRanksBitwiseEqualAndMatchOneRankCpu) { ddp_two_steps(Plane::staged); }

// torchvision resnet18 on 3×32×32, global batch 8 split over the ranks, 2 steps: the GPU
// models summed over the plane against CPU (oneDNN) models summed by MPI, each rank
// feeding both the same slice, same init and optimizer. Batch norm uses each rank's own
// statistics, as DDP does without --sync-bn, so both sides see the same per-rank
// populations. Tolerance: 1e-4 of each tensor's largest magnitude (fp32, cuDNN vs oneDNN
// summation order through 18 layers; a ReLU at its kink can flip, which is why it is not
// 1e-5).
// (The host plane's MPI is a duplicate communicator of its own, apart from the CPU side's.)
void resnet18_step(Plane plane) {
  int rank = 0, size = 1, device = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string why;
  if (!plane_available(plane, rank, size, &device, &why)) GTEST_SKIP() << why;

  const SampleShape shape{3, 32, 32};
  const int classes = 10;
  const int64_t B = 8, local = B / size;
  ASSERT_EQ(B % size, 0);
  auto gcomm = make_plane(plane, device);
  Communicator& pcomm = *gcomm;  // the GPU side's plane
  MpiCommunicator mpi(MPI_COMM_WORLD);
  ModelOptions fp32;
  fp32.tf32 = false;  // compared with the CPU model at 1e-4
  auto gpu = make_cuda_model("resnet18", shape, classes, device, fp32);
  auto cpu = make_model("resnet18", shape, classes);
  gpu->init_params(21);
  cpu->init_params(21);
  gpu->prepare(local, Precision::fp32);
  cpu->prepare(local, Precision::fp32);
  OptimizerOptions o;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  auto gopt = make_cuda_optimizer(o, gpu->params(), gpu->param_count(), gpu->stream());
  auto copt = make_optimizer(o, cpu->params(), cpu->param_count());
  std::vector<size_t> ends;
  for (const auto& p : cpu->params()) ends.push_back(p.offset + p.numel);
  std::sort(ends.begin(), ends.end());
  const auto buckets = plan_buckets(ends, 1 << 20, 64 << 10);
  ASSERT_GE(buckets.size(), 3u);
  GradSync gsync(pcomm, gpu->grad_data(), buckets);
  GradSync csync(mpi, cpu->grad_data(), buckets);

  const size_t P = cpu->param_count();
  ASSERT_EQ(gpu->param_count(), P);
  std::vector<float> g(P);
  for (int step = 0; step < 2; ++step) {
    GlobalBatch gb = global_batch(700, step, B, shape, classes);
    const std::vector<float>& x = gb.x;
    const std::vector<int32_t>& y = gb.y;
    StepContext ctx = gb.ctx;
    const int64_t first = rank * local;
    ctx.sample_ids = gb.ids.data() + first;
    const float* xs = x.data() + first * shape.numel();
    const int32_t* ys = y.data() + first;
    const double lr = 0.05;
    const double gl = gpu->forward_backward(xs, ys, local, ctx, [&](size_t end) {
      gpu->order_before(pcomm.stream());
      gsync.on_ready(end);
    });
    gsync.finish();
    gpu->wait_for(pcomm.stream());  // the optimizer reads the sums
    gopt->step(gpu->param_data(), gpu->grad_data(), lr);
    const double cl = cpu->forward_backward(xs, ys, local, ctx, [&](size_t end) { csync.on_ready(end); });
    csync.finish();
    copt->step(cpu->param_data(), cpu->grad_data(), lr);
    EXPECT_NEAR(gl, cl, 1e-4 * std::fabs(cl)) << "rank " << rank << " step " << step;

    gpu->copy_params_to_host(g.data());
    for (const auto& p : cpu->params()) {
      double num = 0, den = 0;
      for (size_t i = p.offset; i < p.offset + p.numel; ++i) {
        num = std::max(num, std::fabs(double(g[i]) - cpu->param_data()[i]));
        den = std::max(den, std::fabs(double(cpu->param_data()[i])));
      }
      EXPECT_LE(num / std::max(den, 1e-30), 1e-4)
          << p.name << ", rank " << rank << ", step " << step << " (" << plane_name(plane) << ")";
    }
  }
}

TEST(CudaDdp, Resnet18NcclStepEqualsCpuMpiStep) { resnet18_step(Plane::nccl); }
TEST(CudaDdp, Resnet18HostPlaneStepEqualsCpuMpiStep) { resnet18_step(Plane::staged); }

// The Trainer on GPUs (NCCL, or the host plane) against the Trainer on the CPUs with MPI:
// same options (a small CNN with batch norm, so the running statistics' broadcast runs;
// dropout, whose masks the GPU draws bitwise as the CPU; several gradient buckets; TF32
// off), same synthetic data and seed. Steps end with and without a host drain (--log-every 2,
// --check-replicas 3 at steps 3 and 6). After 6 steps: each rank's GPU parameters are
// bitwise rank 0's, and within 1e-5 (of each tensor's largest magnitude) of the CPU run;
// each step's loss within 1e-4 relative.
// The host-plane form builds its world as `cnnscale train --device cuda --backend mpi`
// does (start_world: the device binding lets the ranks share a GPU, the staged
// communicator over MPI), so the Trainer runs exactly what the command runs.
void trainer_vs_cpu(Plane plane) {
  int rank = 0, size = 1, device = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string why;
  if (!plane_available(plane, rank, size, &device, &why)) GTEST_SKIP() << why;

  WorldOptions wo;
  if (plane == Plane::nccl) {
    wo.backend = Backend::nccl;
  } else {
    wo.backend = Backend::mpi;
    wo.device = DeviceRequest::cuda;
  }
  World world = start_world(wo);
  ASSERT_TRUE(world.comm->device_buffers())
      << "the " << plane_name(plane) << " world's communicator must work on device buffers";
  ASSERT_GE(world.ctx.device, 0) << "rank " << rank << " was bound to no GPU";
  if (plane == Plane::staged) {
    EXPECT_EQ(world.comm->backend(), Backend::mpi);
    EXPECT_FALSE(world.comm->sums_on_stream()) << "the host plane's sums finish on the host";
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
    int max_dev = ndev;
    MPI_Allreduce(&ndev, &max_dev, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (max_dev == 1) {
      EXPECT_EQ(world.ctx.gpu_sharing, size) << "one GPU: every rank on it";
    }
  }
  MpiCommunicator mpi(MPI_COMM_WORLD);

  TrainOptions o;
  o.data.synthetic = true;
  o.data.synthetic_samples = 512;
  o.model = "conv(8,3) bn relu maxpool(2) conv(16,3) bn relu dropout(0.25) flatten linear(32) relu linear(10)";
  o.model_options.tf32 = false;  // compared with the CPU model at 1e-5
  o.batch_size = 8;
  o.max_steps = 6;
  o.seed = 5;
  o.lr.lr = 0.05;
  o.optimizer.momentum = 0.9;
  o.optimizer.weight_decay = 1e-4;
  o.evaluate = false;
  o.log_every = 2;
  o.check_replicas = 3;
  o.first_bucket_mb = 4096 / 1e6;  // several buckets: some launched mid-backward
  o.bucket_mb = 16384 / 1e6;

  auto run = [&](Communicator& comm, std::vector<double>* losses) {
    auto t = std::make_unique<Trainer>(o, world.ctx, comm, *world.control);
    t->setup();
    t->resume();
    while (!t->done()) losses->push_back(t->step().loss);
    t->summarize();
    return t;
  };
  std::vector<double> gpu_loss, cpu_loss;
  auto gpu = run(*world.comm, &gpu_loss);
  ASSERT_TRUE(gpu->model().on_device()) << "the " << plane_name(plane) << " Trainer must have trained the GPU model";
  auto cpu = run(mpi, &cpu_loss);
  ASSERT_FALSE(cpu->model().on_device());
  ASSERT_EQ(gpu_loss.size(), 6u);
  ASSERT_EQ(cpu_loss.size(), 6u);
  for (size_t s = 0; s < gpu_loss.size(); ++s) {
    EXPECT_TRUE(std::isfinite(gpu_loss[s])) << "step " << s + 1;
    EXPECT_NEAR(gpu_loss[s], cpu_loss[s], 1e-4 * std::fabs(cpu_loss[s]))
        << "rank " << rank << " step " << s + 1 << " (" << plane_name(plane) << ")";
  }

  const size_t P = gpu->model().param_count();
  ASSERT_EQ(cpu->model().param_count(), P);
  std::vector<float> mine(P), root(P);
  gpu->model().copy_params_to_host(mine.data());
  root = mine;
  MPI_Bcast(root.data(), static_cast<int>(P), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(root.data(), mine.data(), P * sizeof(float)), 0)
      << "rank " << rank << " GPU parameters differ from rank 0's after the Trainer's steps (" << plane_name(plane)
      << ")";
  // (The CPU run trained with lr 0.05, so agreement with it also means the GPU run did.)
  std::vector<float> c(P);
  cpu->model().copy_params_to_host(c.data());
  for (const auto& p : cpu->model().params()) {
    double num = 0, den = 0;
    for (size_t i = p.offset; i < p.offset + p.numel; ++i) {
      num = std::max(num, std::fabs(double(mine[i]) - c[i]));
      den = std::max(den, std::fabs(double(c[i])));
    }
    EXPECT_LE(num / std::max(den, 1e-30), 1e-5)
        << p.name << " vs the CPU Trainer, rank " << rank << " (" << plane_name(plane) << ")";
  }
}

TEST(CudaDdp, TrainerOnNcclEqualsCpuTrainerOnMpi) { trainer_vs_cpu(Plane::nccl); }
TEST(CudaDdp, TrainerOnHostPlaneEqualsCpuTrainerOnMpi) { trainer_vs_cpu(Plane::staged); }
