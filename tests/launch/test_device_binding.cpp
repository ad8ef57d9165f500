// GPU choice among local ranks from injected device lists (physical ids by ordinal):
// node-wide sets, one GPU per task, a GPU two tasks would share, more ranks than GPUs,
// refused for NCCL (naming the fixes, the host data plane among them) and allowed, spread
// evenly and counted, for the host data plane (allow_sharing: --device cuda --backend
// mpi|gloo), no GPU at all.
#include <gtest/gtest.h>

#include "launch/device_binding.hpp"
#include "util/error.hpp"

using namespace cnnscale;

namespace {

const std::vector<std::string> kNode{"GPU-aaaa", "GPU-bbbb", "GPU-cccc", "GPU-dddd"};

std::string error_of(const std::vector<VisibleDevices>& local, int rank, const std::string& host) {
  try {
    choose_device(local, rank, host);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(DeviceBinding, NoGpuMeansCpu) {
  std::vector<VisibleDevices> local(2);
  const DeviceChoice c = choose_device(local, 1, "h");
  EXPECT_EQ(c.device, -1);
  EXPECT_EQ(c.id, "");
}

TEST(DeviceBinding, AllGpusVisibleLocalRankIPicksOrdinalI) {
  // --gres=gpu:4, 4 tasks: every rank sees the same 4 devices.
  std::vector<VisibleDevices> local(4, VisibleDevices{kNode});
  for (int r = 0; r < 4; ++r) {
    const DeviceChoice c = choose_device(local, r, "h");
    EXPECT_EQ(c.device, r);
    EXPECT_EQ(c.id, kNode[static_cast<size_t>(r)]);
  }
}

TEST(DeviceBinding, FewerRanksThanVisibleGpus) {
  std::vector<VisibleDevices> local(2, VisibleDevices{kNode});
  EXPECT_EQ(choose_device(local, 0, "h").device, 0);
  EXPECT_EQ(choose_device(local, 1, "h").device, 1);
}

TEST(DeviceBinding, OneGpuPerTaskDistinctUuidsIsFine) {
  // srun --gpus-per-task=1 / --gpu-bind: each task sees only its own GPU, as ordinal 0 —
  // the old CUDA_VISIBLE_DEVICES comparison called this "more ranks than GPUs" when the
  // strings matched; the UUIDs differ, so each rank keeps ordinal 0.
  std::vector<VisibleDevices> local;
  for (const auto& id : kNode) local.push_back({{id}});
  for (int r = 0; r < 4; ++r) {
    const DeviceChoice c = choose_device(local, r, "h");
    EXPECT_EQ(c.device, 0);
    EXPECT_EQ(c.id, kNode[static_cast<size_t>(r)]);
  }
}

TEST(DeviceBinding, RestrictedSetInAnotherOrder) {
  // Rank 0 sees (c, d), rank 1 sees (d, c): different ordinals, distinct physical GPUs.
  std::vector<VisibleDevices> local{{{"GPU-cccc", "GPU-dddd"}}, {{"GPU-dddd", "GPU-cccc"}}};
  const DeviceChoice a = choose_device(local, 0, "h"), b = choose_device(local, 1, "h");
  EXPECT_EQ(a.id, "GPU-cccc");
  EXPECT_EQ(b.id, "GPU-dddd");
  EXPECT_EQ(b.device, 0);
}

TEST(DeviceBinding, EarlierRankMovesSoALaterOneFitsToo) {
  // Rank 0 sees (a, b), rank 1 only a: rank 0 must take b.
  std::vector<VisibleDevices> local{{{"GPU-aaaa", "GPU-bbbb"}}, {{"GPU-aaaa"}}};
  EXPECT_EQ(choose_device(local, 0, "h").id, "GPU-bbbb");
  EXPECT_EQ(choose_device(local, 0, "h").device, 1);
  EXPECT_EQ(choose_device(local, 1, "h").id, "GPU-aaaa");
}

TEST(DeviceBinding, TwoRanksSeeingTheSameSingleGpuIsAnErrorNamingTheFix) {
  // Both tasks got the same GPU (e.g. --gres=gpu:1 with 2 tasks per node).
  std::vector<VisibleDevices> local(2, VisibleDevices{{"GPU-aaaa"}});
  for (int r = 0; r < 2; ++r) {
    const std::string m = error_of(local, r, "node7");
    EXPECT_NE(m.find("local ranks 0 and 1 on node7 would share one GPU (GPU-aaaa)"), std::string::npos) << m;
    EXPECT_NE(m.find("see 1 distinct GPU(s)"), std::string::npos) << m;
    EXPECT_NE(m.find("--ntasks-per-node=1 --gres=gpu:1"), std::string::npos) << m;
    EXPECT_NE(m.find("--backend mpi"), std::string::npos) << m;
  }
}

TEST(DeviceBinding, MoreRanksThanGpusIsAnError) {
  std::vector<VisibleDevices> local(3, VisibleDevices{{"GPU-aaaa", "GPU-bbbb"}});
  const std::string m = error_of(local, 1, "node7");
  EXPECT_NE(m.find("on node7 would share one GPU"), std::string::npos) << m;
  EXPECT_NE(m.find("3 ranks on this node see 2 distinct GPU(s)"), std::string::npos) << m;
  EXPECT_NE(m.find("--ntasks-per-node=2 --gres=gpu:2"), std::string::npos) << m;
  // Ranks that see no GPU at all are not part of a conflict.
  std::vector<VisibleDevices> mixed{{{"GPU-aaaa"}}, {}, {{"GPU-bbbb"}}};
  EXPECT_EQ(error_of(mixed, 0, "h"), "");
  EXPECT_EQ(choose_device(mixed, 1, "h").device, -1);
}

TEST(DeviceBinding, TwoRanksOnOneGpuAreRefusedForNccl) {
  // --allow-gpu-sharing is gone (issue 28 item 4): for NCCL no option lets this through;
  // the message names the host data plane that allows it.
  std::vector<VisibleDevices> local(2, VisibleDevices{{"GPU-aaaa"}});
  EXPECT_NE(error_of(local, 1, "h").find("local ranks 0 and 1 on h would share one GPU (GPU-aaaa)"), std::string::npos);
  EXPECT_NE(error_of(local, 1, "h").find("--backend mpi"), std::string::npos);
  EXPECT_NE(error_of(local, 1, "h").find("--device cuda --backend mpi (or gloo)"), std::string::npos);
}

TEST(DeviceBinding, HostDataPlaneSharesGpusEvenly) {
  // Two ranks, one GPU: both on it, each told it is shared by 2.
  std::vector<VisibleDevices> one(2, VisibleDevices{{"GPU-aaaa"}});
  for (int r = 0; r < 2; ++r) {
    const DeviceChoice c = choose_device(one, r, "h", true);
    EXPECT_EQ(c.device, 0);
    EXPECT_EQ(c.id, "GPU-aaaa");
    EXPECT_EQ(c.sharing, 2);
  }
  // Five ranks, two GPUs: 3 + 2, distinct ones first (local rank i ordinal i), then the
  // least loaded.
  std::vector<VisibleDevices> five(5, VisibleDevices{{"GPU-aaaa", "GPU-bbbb"}});
  int on_a = 0;
  for (int r = 0; r < 5; ++r) {
    const DeviceChoice c = choose_device(five, r, "h", true);
    on_a += c.id == "GPU-aaaa";
    EXPECT_EQ(c.sharing, c.id == "GPU-aaaa" ? 3 : 2) << "rank " << r;
  }
  EXPECT_EQ(on_a, 3);
  EXPECT_EQ(choose_device(five, 0, "h", true).device, 0);
  EXPECT_EQ(choose_device(five, 1, "h", true).device, 1);
  // A GPU of its own each: nothing shared.
  std::vector<VisibleDevices> node(4, VisibleDevices{kNode});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(choose_device(node, r, "h", true).sharing, 1);
  // No GPU: the CPU, whatever is allowed.
  std::vector<VisibleDevices> none(2);
  EXPECT_EQ(choose_device(none, 0, "h", true).device, -1);
}
